use super::*;
use xlane_te::Resources;

fn res() -> Resources {
    Resources {
        load_bytes: 100,
        period_ns: 200_000,
        min_latency_ns: 5,
        max_jitter_ns: 6,
    }
}

#[test]
fn examples_round_trip_and_are_canonical() {
    let msgs = vec![
        ClientMsg::Hello {
            host: "h0".into(),
            client_nonce: [7; 32],
        },
        ClientMsg::ListTunnels,
        ClientMsg::RequestBandwidth {
            sender: "h0".into(),
            receivers: vec!["h1".into(), "h2".into()],
            load_bytes: 64,
            period_ns: 200_000,
            sublane: 1,
        },
        ClientMsg::TunnelKey {
            tunnel: TunnelId(9),
        },
    ];
    for m in msgs {
        let b = m.to_frame().unwrap();
        let (d, n) = ClientMsg::decode(&b).unwrap();
        assert_eq!(d, m);
        assert_eq!(n, b.len());
    }
    let key = ServerMsg::Key {
        tunnel: TunnelId(9),
        key: std::array::from_fn(|i| i as u8 * 17),
    };
    let b = key.to_frame().unwrap();
    assert_eq!(ServerMsg::decode(&b).unwrap(), (key, b.len()));
}

#[test]
fn decode_errors_are_typed() {
    let ok = ServerMsg::Granted {
        tunnel: TunnelId(3),
        resources: res(),
        period_raised: true,
    }
    .to_frame()
    .unwrap();
    let table: Vec<(Vec<u8>, ProtoError)> = vec![
        (vec![], ProtoError::Truncated),
        (ok[..ok.len() - 1].to_vec(), ProtoError::Truncated),
        (
            vec![0, 1, 0, 1, VERSION, 0x83],
            ProtoError::TooLong {
                len: 65537,
                max: MAX_FRAME,
            },
        ),
        (vec![0, 0, 0, 1, VERSION], ProtoError::TooShort(1)),
        (vec![0, 0, 0, 2, 9, 0x82], ProtoError::BadVersion(9)),
        (vec![0, 0, 0, 2, VERSION, 0x01], ProtoError::UnknownKind(1)),
        (
            vec![0, 0, 0, 3, VERSION, 0x82, 0],
            ProtoError::TrailingBytes(1),
        ),
        (
            {
                let mut b = ok.clone();
                *b.last_mut().unwrap() = 2;
                b
            },
            ProtoError::FieldOutOfRange {
                field: "period_raised",
            },
        ),
        (
            vec![0, 0, 0, 6, VERSION, 0x84, 0, 99, 0, 0],
            ProtoError::FieldOutOfRange { field: "code" },
        ),
        (
            vec![0, 0, 0, 7, VERSION, 0x84, 0, 1, 0, 1, 0xff],
            ProtoError::BadUtf8 { field: "message" },
        ),
    ];
    for (i, (bytes, want)) in table.into_iter().enumerate() {
        assert_eq!(ServerMsg::decode(&bytes).unwrap_err(), want, "case {i}");
    }
}

#[test]
fn encoder_refuses_what_decoder_would() {
    let m = ClientMsg::Hello {
        host: "x".repeat(MAX_NAME + 1),
        client_nonce: [0; 32],
    };
    let mut out = vec![1, 2, 3];
    assert_eq!(
        m.encode(&mut out).unwrap_err(),
        EncodeError::TooLong { field: "host" }
    );
    assert_eq!(out, vec![1, 2, 3], "buffer unchanged on error");
    let big = ServerMsg::Tunnels {
        list: (0..2000)
            .map(|i| TunnelInfo {
                tunnel: TunnelId(i),
                sender: "h".repeat(20),
                receivers: vec!["r".repeat(20)],
                sublane: 0,
                state: TunnelState::Active,
                requested_period_ns: 1,
                resources: res(),
            })
            .collect(),
        truncated: false,
    };
    assert_eq!(
        big.to_frame().unwrap_err(),
        EncodeError::TooLong { field: "frame" }
    );
}

#[test]
fn frame_buffer_cuts_a_stream_at_any_split() {
    let a = ClientMsg::ListTunnels.to_frame().unwrap();
    let b = ClientMsg::ReleaseBandwidth {
        tunnel: TunnelId(9),
    }
    .to_frame()
    .unwrap();
    let all: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
    for cut in 0..=all.len() {
        let mut fb = FrameBuffer::new();
        let mut got = Vec::new();
        for part in [&all[..cut], &all[cut..]] {
            fb.push(part);
            while let Some(f) = fb.next_frame().unwrap() {
                got.push(ClientMsg::decode(&f).unwrap().0);
            }
        }
        assert_eq!(got.len(), 2, "cut {cut}");
        assert_eq!(fb.pending(), 0);
    }
}

#[test]
fn refusal_codes_round_trip() {
    for c in RefusalCode::ALL {
        assert_eq!(RefusalCode::from_u16(c as u16), Some(c));
    }
    assert_eq!(RefusalCode::from_u16(0), None);
}

/// A `NotLeader` refusal's serving replica is read back from its
/// message, IPv4 or IPv6; one that names none gives none.
#[test]
fn not_leader_hints() {
    for a in ["10.0.0.2:7070", "[::1]:7071"] {
        let a: std::net::SocketAddr = a.parse().unwrap();
        assert_eq!(not_leader_hint(&not_leader_message(Some(a))), Some(a));
    }
    assert_eq!(not_leader_hint(&not_leader_message(None)), None);
    assert_eq!(not_leader_hint("the serving one is at nowhere"), None);
}
