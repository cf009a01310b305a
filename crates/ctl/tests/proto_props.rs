//! Property tests of the wire codec: every message round-trips, encoding is
//! canonical, any prefix is `Truncated`, and no byte string panics the
//! decoder.

use proptest::prelude::*;
use xlane_ctl::proto::*;
use xlane_ctl::store::Record;
use xlane_te::Resources;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,12}",
        ".{0,20}", // any UTF-8
    ]
    .prop_filter("fits", |s| s.len() <= MAX_NAME)
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(name(), 0..6)
}

fn hops() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((name(), name()), 0..8)
}

fn resources() -> impl Strategy<Value = Resources> {
    (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(l, p, m, j)| Resources {
        load_bytes: l,
        period_ns: p,
        min_latency_ns: m,
        max_jitter_ns: j,
    })
}

fn tid() -> impl Strategy<Value = TunnelId> {
    any::<u64>().prop_map(TunnelId)
}

fn client_msg() -> impl Strategy<Value = ClientMsg> {
    prop_oneof![
        (name(), any::<[u8; 32]>())
            .prop_map(|(host, client_nonce)| ClientMsg::Hello { host, client_nonce }),
        any::<[u8; 32]>().prop_map(|mac| ClientMsg::Auth { mac }),
        (name(), names(), any::<u32>(), any::<u64>(), any::<u8>()).prop_map(
            |(sender, receivers, load_bytes, period_ns, sublane)| ClientMsg::RequestBandwidth {
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane
            }
        ),
        tid().prop_map(|tunnel| ClientMsg::ReleaseBandwidth { tunnel }),
        (tid(), any::<u32>(), any::<u64>()).prop_map(|(tunnel, load_bytes, period_ns)| {
            ClientMsg::ChangeBandwidth {
                tunnel,
                load_bytes,
                period_ns,
            }
        }),
        prop::collection::vec(
            (tid(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(tunnel, packets, bytes, interval_ns)| {
                    MeterReading {
                        tunnel,
                        packets,
                        bytes,
                        interval_ns,
                    }
                }
            ),
            0..8
        )
        .prop_map(|readings| ClientMsg::ReportMeters { readings }),
        prop::collection::vec(tid(), 0..8).prop_map(|tunnels| ClientMsg::ReconcileHost { tunnels }),
        Just(ClientMsg::ListTunnels),
        any::<u64>().prop_map(|after| ClientMsg::Subscribe { after }),
        (any::<u64>(), tid()).prop_map(|(request_id, tunnel)| ClientMsg::Tagged {
            request_id,
            msg: Box::new(ClientMsg::ReleaseBandwidth { tunnel }),
        }),
    ]
}

fn upcall() -> impl Strategy<Value = Upcall> {
    prop_oneof![
        (tid(), resources(), resources(), 0u8..3, any::<u64>()).prop_map(
            |(tunnel, old, new, r, grace_ns)| {
                Upcall::BandwidthChanged {
                    tunnel,
                    old,
                    new,
                    reason: [Reason::Te, Reason::BwExceeded, Reason::BwUnused][r as usize],
                    grace_ns,
                }
            }
        ),
        (tid(), 0u8..3).prop_map(|(tunnel, r)| Upcall::BandwidthTerminated {
            tunnel,
            reason: [
                TerminateReason::BwExceeded,
                TerminateReason::BwUnused,
                TerminateReason::Unknown
            ][r as usize],
        }),
    ]
}

fn info() -> impl Strategy<Value = TunnelInfo> {
    (
        tid(),
        name(),
        names(),
        any::<u8>(),
        any::<bool>(),
        any::<u64>(),
        resources(),
    )
        .prop_map(
            |(tunnel, sender, receivers, sublane, unb, requested_period_ns, resources)| {
                TunnelInfo {
                    tunnel,
                    sender,
                    receivers,
                    sublane,
                    state: if unb {
                        TunnelState::Unbounded
                    } else {
                        TunnelState::Active
                    },
                    requested_period_ns,
                    resources,
                }
            },
        )
}

fn server_msg() -> impl Strategy<Value = ServerMsg> {
    prop_oneof![
        any::<[u8; 32]>().prop_map(|server_nonce| ServerMsg::Challenge { server_nonce }),
        Just(ServerMsg::AuthOk),
        (tid(), resources(), any::<bool>()).prop_map(|(tunnel, resources, period_raised)| {
            ServerMsg::Granted {
                tunnel,
                resources,
                period_raised,
            }
        }),
        (0..RefusalCode::ALL.len(), ".{0,40}").prop_map(|(i, message)| ServerMsg::Refused {
            code: RefusalCode::ALL[i],
            message
        }),
        tid().prop_map(|tunnel| ServerMsg::Released { tunnel }),
        (tid(), resources(), any::<bool>()).prop_map(|(tunnel, resources, period_raised)| {
            ServerMsg::Changed {
                tunnel,
                resources,
                period_raised,
            }
        }),
        (prop::collection::vec(info(), 0..5), any::<bool>())
            .prop_map(|(list, truncated)| ServerMsg::Tunnels { list, truncated }),
        (
            prop::collection::vec(tid(), 0..5),
            prop::collection::vec(tid(), 0..5)
        )
            .prop_map(|(kept, terminated)| ServerMsg::Reconciled { kept, terminated }),
        Just(ServerMsg::Ack),
        any::<u64>().prop_map(|seq| ServerMsg::Subscribed { seq }),
        (any::<u64>(), upcall()).prop_map(|(seq, upcall)| ServerMsg::Upcall { seq, upcall }),
    ]
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        any::<u64>().prop_map(|next| Record::NextId { next }),
        (
            tid(),
            name(),
            names(),
            any::<u32>(),
            any::<u64>(),
            any::<u8>(),
            resources(),
            hops()
        )
            .prop_map(
                |(tunnel, sender, receivers, load_bytes, period_ns, sublane, resources, hops)| {
                    Record::Granted {
                        tunnel,
                        sender,
                        receivers,
                        load_bytes,
                        period_ns,
                        sublane,
                        resources,
                        hops,
                    }
                }
            ),
        (tid(), any::<u32>(), any::<u64>(), resources()).prop_map(
            |(tunnel, load_bytes, period_ns, resources)| {
                Record::Changed {
                    tunnel,
                    load_bytes,
                    period_ns,
                    resources,
                }
            }
        ),
        tid().prop_map(|tunnel| Record::Released { tunnel }),
        tid().prop_map(|tunnel| Record::Demoted { tunnel }),
        tid().prop_map(|tunnel| Record::Terminated { tunnel }),
        (
            tid(),
            name(),
            names(),
            any::<u32>(),
            any::<(u64, u64)>(),
            any::<u8>(),
            any::<bool>(),
            (resources(), hops())
        )
            .prop_map(
                |(
                    tunnel,
                    sender,
                    receivers,
                    load_bytes,
                    (rp, p),
                    sublane,
                    unbounded,
                    (resources, hops),
                )| {
                    Record::Tunnel {
                        tunnel,
                        sender,
                        receivers,
                        load_bytes,
                        requested_period_ns: rp,
                        period_ns: p,
                        sublane,
                        unbounded,
                        resources,
                        hops,
                    }
                }
            ),
    ]
}

fn check_round_trip<M: Message + PartialEq + std::fmt::Debug>(m: &M) -> Result<(), TestCaseError> {
    let bytes = m
        .to_frame()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert!(bytes.len() <= HEADER_LEN + MAX_FRAME);
    let (d, n) = M::decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&d, m);
    prop_assert_eq!(n, bytes.len());
    // Canonical: decoding then encoding gives the same bytes.
    prop_assert_eq!(d.to_frame().unwrap(), bytes.clone());
    // Any strict prefix is incomplete, never mistaken for a message.
    for cut in [0, 1, 3, 4, 5, bytes.len() / 2, bytes.len() - 1] {
        if cut < bytes.len() {
            prop_assert_eq!(M::decode(&bytes[..cut]).unwrap_err(), ProtoError::Truncated);
        }
    }
    // Trailing garbage inside the frame is refused.
    let mut longer = bytes.clone();
    longer.push(0);
    let len = (bytes.len() - HEADER_LEN + 1) as u32;
    longer[..4].copy_from_slice(&len.to_be_bytes());
    prop_assert!(M::decode(&longer).is_err());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn client_messages_round_trip(m in client_msg()) {
        check_round_trip(&m)?;
    }

    #[test]
    fn server_messages_round_trip(m in server_msg()) {
        check_round_trip(&m)?;
    }

    #[test]
    fn records_round_trip(r in record()) {
        let b = r.encode().unwrap();
        prop_assert_eq!(Record::decode(&b).unwrap(), r);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), kind in any::<u8>()) {
        // Raw, and with a valid header so the body decoders are reached.
        let _ = ClientMsg::decode(&bytes);
        let _ = ServerMsg::decode(&bytes);
        let _ = Record::decode(&bytes);
        let mut framed = ((bytes.len() + 2) as u32).to_be_bytes().to_vec();
        framed.push(VERSION);
        framed.push(kind);
        framed.extend_from_slice(&bytes);
        if let Ok((m, n)) = ClientMsg::decode(&framed) {
            prop_assert_eq!(n, framed.len());
            prop_assert_eq!(m.to_frame().unwrap(), framed.clone());
        }
        if let Ok((m, n)) = ServerMsg::decode(&framed) {
            prop_assert_eq!(n, framed.len());
            prop_assert_eq!(m.to_frame().unwrap(), framed);
        }
    }
}

/// What the decoder refuses inside `Tagged`, the encoder refuses too.
#[test]
fn connection_messages_cannot_be_tagged() {
    for inner in [
        ClientMsg::Subscribe { after: 1 },
        ClientMsg::Auth { mac: [0; 32] },
        ClientMsg::Tagged {
            request_id: 1,
            msg: Box::new(ClientMsg::ListTunnels),
        },
    ] {
        let m = ClientMsg::Tagged {
            request_id: 9,
            msg: Box::new(inner.clone()),
        };
        assert!(m.to_frame().is_err(), "{inner:?}");
    }
    let ok = ClientMsg::Tagged {
        request_id: 9,
        msg: Box::new(ClientMsg::ListTunnels),
    };
    let f = ok.to_frame().unwrap();
    assert_eq!(ClientMsg::decode(&f).unwrap().0, ok);
}
