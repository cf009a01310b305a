//! Each message's encoding and decoding ([`Message`] for [`ClientMsg`] and
//! [`ServerMsg`]).

use super::codec::*;
use super::frame::*;
use super::msg::*;

impl Message for ClientMsg {
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            ClientMsg::Hello { host, client_nonce } => frame(kind::HELLO, out, |w| {
                w.str("host", host, MAX_NAME)?;
                w.bytes32(client_nonce);
                Ok(())
            }),
            ClientMsg::Auth { mac } => frame(kind::AUTH, out, |w| {
                w.bytes32(mac);
                Ok(())
            }),
            ClientMsg::RequestBandwidth {
                sender,
                receivers,
                load_bytes,
                period_ns,
                sublane,
            } => frame(kind::REQUEST, out, |w| {
                w.str("sender", sender, MAX_NAME)?;
                w.strs("receivers", receivers, MAX_RECEIVERS)?;
                w.u32(*load_bytes);
                w.u64(*period_ns);
                w.u8(*sublane);
                Ok(())
            }),
            ClientMsg::ReleaseBandwidth { tunnel } => frame(kind::RELEASE, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
            ClientMsg::ChangeBandwidth {
                tunnel,
                load_bytes,
                period_ns,
            } => frame(kind::CHANGE, out, |w| {
                w.u64(tunnel.0);
                w.u32(*load_bytes);
                w.u64(*period_ns);
                Ok(())
            }),
            ClientMsg::ReportMeters { readings } => frame(kind::METERS, out, |w| {
                w.count("readings", readings.len(), MAX_READINGS)?;
                for r in readings {
                    w.u64(r.tunnel.0);
                    w.u64(r.packets);
                    w.u64(r.bytes);
                    w.u64(r.interval_ns);
                }
                Ok(())
            }),
            ClientMsg::ReconcileHost { tunnels } => frame(kind::RECONCILE, out, |w| {
                w.count("tunnels", tunnels.len(), MAX_TUNNEL_IDS)?;
                for t in tunnels {
                    w.u64(t.0);
                }
                Ok(())
            }),
            ClientMsg::ListTunnels => frame(kind::LIST, out, |_| Ok(())),
            ClientMsg::Subscribe { after } => frame(kind::SUBSCRIBE, out, |w| {
                w.u64(*after);
                Ok(())
            }),
            ClientMsg::Tagged { request_id, msg } => {
                let inner = match **msg {
                    ClientMsg::Hello { .. } => Some("Hello"),
                    ClientMsg::Auth { .. } => Some("Auth"),
                    ClientMsg::Subscribe { .. } => Some("Subscribe"),
                    ClientMsg::Tagged { .. } => Some("Tagged"),
                    _ => None,
                };
                if let Some(what) = inner {
                    return Err(EncodeError::NotTaggable(what));
                }
                frame(kind::TAGGED, out, |w| {
                    w.u64(*request_id);
                    msg.encode(w.out)
                })
            }
            ClientMsg::TunnelKey { tunnel } => frame(kind::TUNNEL_KEY, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
        }
    }

    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError> {
        let f = split_frame(buf)?.ok_or(ProtoError::Truncated)?;
        let mut r = Reader::new(f.body);
        let msg = match f.kind {
            kind::HELLO => ClientMsg::Hello {
                host: r.str("host", MAX_NAME)?,
                client_nonce: r.bytes32()?,
            },
            kind::AUTH => ClientMsg::Auth { mac: r.bytes32()? },
            kind::REQUEST => ClientMsg::RequestBandwidth {
                sender: r.str("sender", MAX_NAME)?,
                receivers: r.strs("receivers", MAX_RECEIVERS)?,
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
                sublane: r.u8()?,
            },
            kind::RELEASE => ClientMsg::ReleaseBandwidth {
                tunnel: TunnelId(r.u64()?),
            },
            kind::CHANGE => ClientMsg::ChangeBandwidth {
                tunnel: TunnelId(r.u64()?),
                load_bytes: r.u32()?,
                period_ns: r.u64()?,
            },
            kind::METERS => {
                let n = r.count("readings", MAX_READINGS)?;
                let mut readings = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    readings.push(MeterReading {
                        tunnel: TunnelId(r.u64()?),
                        packets: r.u64()?,
                        bytes: r.u64()?,
                        interval_ns: r.u64()?,
                    });
                }
                ClientMsg::ReportMeters { readings }
            }
            kind::RECONCILE => ClientMsg::ReconcileHost {
                tunnels: ids(&mut r, "tunnels")?,
            },
            kind::LIST => ClientMsg::ListTunnels,
            kind::SUBSCRIBE => ClientMsg::Subscribe { after: r.u64()? },
            kind::TUNNEL_KEY => ClientMsg::TunnelKey {
                tunnel: TunnelId(r.u64()?),
            },
            kind::TAGGED => {
                let request_id = r.u64()?;
                let rest = r.rest();
                let (msg, used) = ClientMsg::decode(rest)?;
                if used != rest.len() {
                    return Err(ProtoError::TrailingBytes(rest.len() - used));
                }
                if matches!(
                    msg,
                    ClientMsg::Hello { .. }
                        | ClientMsg::Auth { .. }
                        | ClientMsg::Subscribe { .. }
                        | ClientMsg::Tagged { .. }
                ) {
                    return Err(ProtoError::FieldOutOfRange {
                        field: "tagged message",
                    });
                }
                ClientMsg::Tagged {
                    request_id,
                    msg: Box::new(msg),
                }
            }
            k => return Err(ProtoError::UnknownKind(k)),
        };
        r.finish()?;
        Ok((msg, f.len))
    }
}

impl ServerMsg {
    /// The message as a frame; a message too long to encode becomes an
    /// `Internal` refusal that says so (only over-long messages fail).
    pub fn frame_or_refusal(&self) -> Vec<u8> {
        match self.to_frame() {
            Ok(f) => f,
            Err(e) => ServerMsg::Refused {
                code: RefusalCode::Internal,
                message: format!("reply could not be encoded: {e}"),
            }
            .to_frame()
            .unwrap_or_default(),
        }
    }
}

impl Message for ServerMsg {
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            ServerMsg::Challenge { server_nonce } => frame(kind::CHALLENGE, out, |w| {
                w.bytes32(server_nonce);
                Ok(())
            }),
            ServerMsg::AuthOk => frame(kind::AUTH_OK, out, |_| Ok(())),
            ServerMsg::Granted {
                tunnel,
                resources,
                period_raised,
            } => frame(kind::GRANTED, out, |w| {
                w.u64(tunnel.0);
                w.resources(resources);
                w.bool(*period_raised);
                Ok(())
            }),
            ServerMsg::Refused { code, message } => frame(kind::REFUSED, out, |w| {
                w.u16(*code as u16);
                w.str("message", message, MAX_MESSAGE)
            }),
            ServerMsg::Released { tunnel } => frame(kind::RELEASED, out, |w| {
                w.u64(tunnel.0);
                Ok(())
            }),
            ServerMsg::Key { tunnel, key } => frame(kind::KEY, out, |w| {
                w.u64(tunnel.0);
                w.u64(u64::from_be_bytes(key[..8].try_into().expect("8 bytes")));
                w.u64(u64::from_be_bytes(key[8..].try_into().expect("8 bytes")));
                Ok(())
            }),
            ServerMsg::Changed {
                tunnel,
                resources,
                period_raised,
            } => frame(kind::CHANGED, out, |w| {
                w.u64(tunnel.0);
                w.resources(resources);
                w.bool(*period_raised);
                Ok(())
            }),
            ServerMsg::Tunnels { list, truncated } => frame(kind::TUNNELS, out, |w| {
                w.count("list", list.len(), u16::MAX as usize)?;
                for t in list {
                    w.u64(t.tunnel.0);
                    w.str("sender", &t.sender, MAX_NAME)?;
                    w.strs("receivers", &t.receivers, MAX_RECEIVERS)?;
                    w.u8(t.sublane);
                    w.u8(t.state.to_u8());
                    w.u64(t.requested_period_ns);
                    w.resources(&t.resources);
                }
                w.bool(*truncated);
                Ok(())
            }),
            ServerMsg::Reconciled { kept, terminated } => frame(kind::RECONCILED, out, |w| {
                put_ids(w, "kept", kept)?;
                put_ids(w, "terminated", terminated)
            }),
            ServerMsg::Ack => frame(kind::ACK, out, |_| Ok(())),
            ServerMsg::Subscribed { seq } => frame(kind::SUBSCRIBED, out, |w| {
                w.u64(*seq);
                Ok(())
            }),
            ServerMsg::Upcall {
                seq,
                upcall:
                    Upcall::BandwidthChanged {
                        tunnel,
                        old,
                        new,
                        reason,
                        grace_ns,
                    },
            } => frame(kind::BW_CHANGED, out, |w| {
                w.u64(*seq);
                w.u64(tunnel.0);
                w.resources(old);
                w.resources(new);
                w.u8(reason.to_u8());
                w.u64(*grace_ns);
                Ok(())
            }),
            ServerMsg::Upcall {
                seq,
                upcall: Upcall::BandwidthTerminated { tunnel, reason },
            } => frame(kind::BW_TERMINATED, out, |w| {
                w.u64(*seq);
                w.u64(tunnel.0);
                w.u8(reason.to_u8());
                Ok(())
            }),
        }
    }

    fn decode(buf: &[u8]) -> Result<(Self, usize), ProtoError> {
        let f = split_frame(buf)?.ok_or(ProtoError::Truncated)?;
        let mut r = Reader::new(f.body);
        let msg = match f.kind {
            kind::CHALLENGE => ServerMsg::Challenge {
                server_nonce: r.bytes32()?,
            },
            kind::AUTH_OK => ServerMsg::AuthOk,
            kind::GRANTED => ServerMsg::Granted {
                tunnel: TunnelId(r.u64()?),
                resources: r.resources()?,
                period_raised: r.bool("period_raised")?,
            },
            kind::REFUSED => {
                let code = RefusalCode::from_u16(r.u16()?)
                    .ok_or(ProtoError::FieldOutOfRange { field: "code" })?;
                ServerMsg::Refused {
                    code,
                    message: r.str("message", MAX_MESSAGE)?,
                }
            }
            kind::RELEASED => ServerMsg::Released {
                tunnel: TunnelId(r.u64()?),
            },
            kind::KEY => {
                let tunnel = TunnelId(r.u64()?);
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&r.u64()?.to_be_bytes());
                key[8..].copy_from_slice(&r.u64()?.to_be_bytes());
                ServerMsg::Key { tunnel, key }
            }
            kind::CHANGED => ServerMsg::Changed {
                tunnel: TunnelId(r.u64()?),
                resources: r.resources()?,
                period_raised: r.bool("period_raised")?,
            },
            kind::TUNNELS => {
                let n = r.count("list", u16::MAX as usize)?;
                let mut list = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    list.push(TunnelInfo {
                        tunnel: TunnelId(r.u64()?),
                        sender: r.str("sender", MAX_NAME)?,
                        receivers: r.strs("receivers", MAX_RECEIVERS)?,
                        sublane: r.u8()?,
                        state: TunnelState::from_u8(r.u8()?)?,
                        requested_period_ns: r.u64()?,
                        resources: r.resources()?,
                    });
                }
                ServerMsg::Tunnels {
                    list,
                    truncated: r.bool("truncated")?,
                }
            }
            kind::RECONCILED => ServerMsg::Reconciled {
                kept: ids(&mut r, "kept")?,
                terminated: ids(&mut r, "terminated")?,
            },
            kind::ACK => ServerMsg::Ack,
            kind::SUBSCRIBED => ServerMsg::Subscribed { seq: r.u64()? },
            kind::BW_CHANGED => ServerMsg::Upcall {
                seq: r.u64()?,
                upcall: Upcall::BandwidthChanged {
                    tunnel: TunnelId(r.u64()?),
                    old: r.resources()?,
                    new: r.resources()?,
                    reason: Reason::from_u8(r.u8()?)?,
                    grace_ns: r.u64()?,
                },
            },
            kind::BW_TERMINATED => ServerMsg::Upcall {
                seq: r.u64()?,
                upcall: Upcall::BandwidthTerminated {
                    tunnel: TunnelId(r.u64()?),
                    reason: TerminateReason::from_u8(r.u8()?)?,
                },
            },
            k => return Err(ProtoError::UnknownKind(k)),
        };
        r.finish()?;
        Ok((msg, f.len))
    }
}
