//! The router core: each policy's picks, JBSQ's bound and queue, FEEDBACK
//! accounting, stickiness of retransmitted REQ0s, bounded memory, refused
//! packets; and a seeded simulation of clients, the router and server cores
//! where every request is answered exactly once under every policy.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_lane::sim::SimRng;
use xlane_rpc::router::{Policy, Router, RouterConfig, RouterRecvError, RouterStats};
use xlane_rpc::wire::{Feedback, Header, MsgType, Packet, MAX_PACKET_LEN};
use xlane_rpc::{
    Client, ClientConfig, Identity, Outcome, RequestHandle, Server, ServerConfig, ServerHandle,
};

const MS: u64 = 1_000_000;

fn addr(last: u8, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), port)
}

fn servers(n: u8) -> Vec<SocketAddrV4> {
    (0..n).map(|i| addr(100 + i, 8000)).collect()
}

/// Packet `index` of `count` of a message of type `t`, policy `policy`.
fn packet(t: MsgType, policy: u8, rid: u16, index: u16, count: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; MAX_PACKET_LEN];
    let n = Header::for_packet(t, policy, rid, index, count)
        .emit(payload, &mut b)
        .unwrap();
    b.truncate(n);
    b
}

fn req0(rid: u16) -> Vec<u8> {
    packet(MsgType::Request, 0, rid, 0, 1, b"hello")
}

fn feedback(client: SocketAddrV4, rid: u16) -> Vec<u8> {
    let fb = Feedback::from(Identity::of(client, rid));
    packet(MsgType::Feedback, 1, rid, 0, 1, &fb.to_bytes())
}

/// Every packet the router queued: (destination, origin, type).
fn drain(r: &mut Router) -> Vec<(SocketAddrV4, SocketAddrV4, MsgType)> {
    let mut buf = [0u8; MAX_PACKET_LEN];
    let mut out = Vec::new();
    while let Some(f) = r.poll_transmit(&mut buf) {
        let t = Packet::new_checked(&buf[..f.len]).unwrap().msg_type();
        out.push((f.dst, f.origin, t));
    }
    out
}

fn server_index(r: &Router, a: SocketAddrV4) -> usize {
    r.config().servers.iter().position(|s| *s == a).unwrap()
}

#[test]
fn policies_parse_and_print() {
    for (text, want) in [
        ("random", Some(Policy::Random)),
        ("round-robin", Some(Policy::RoundRobin)),
        ("rr", Some(Policy::RoundRobin)),
        ("jsq", Some(Policy::Jsq)),
        ("jbsq:1", Some(Policy::Jbsq(1))),
        ("jbsq:16", Some(Policy::Jbsq(16))),
        ("jbsq:0", None),
        ("jbsq:", None),
        ("jbsq", None),
        ("JSQ", None),
        ("", None),
    ] {
        let got = text.parse::<Policy>().ok();
        assert_eq!(got, want, "{text}");
        if let Some(p) = got {
            if text != "rr" {
                assert_eq!(p.to_string(), text);
            }
        }
    }
}

/// Six new requests from one client, no FEEDBACK: where each policy sends
/// them, and what waits.
#[test]
fn each_policy_places_requests() {
    let c = addr(1, 4000);
    // (policy, servers each request went to (None: waits at the router)).
    let table: &[(Policy, &[Option<usize>])] = &[
        (
            Policy::RoundRobin,
            &[Some(0), Some(1), Some(2), Some(0), Some(1), Some(2)],
        ),
        (Policy::Jbsq(1), &[None; 0]),
    ];
    for (policy, want) in table {
        if want.is_empty() {
            continue;
        }
        let mut r = Router::new(RouterConfig::new(servers(3), *policy));
        let mut got = Vec::new();
        for rid in 0..6 {
            r.handle_datagram(0, c, &req0(rid)).unwrap();
            let out = drain(&mut r);
            got.push(out.first().map(|o| server_index(&r, o.0)));
        }
        assert_eq!(&got[..], *want, "{policy}");
    }
    // JSQ and JBSQ(2) never give a server two more than another; JBSQ(1)
    // sends three and holds three; random uses every server (seeded).
    for (policy, sent, held, spread) in [
        (Policy::Jsq, 6, 0, 0),
        (Policy::Jbsq(2), 6, 0, 0),
        (Policy::Jbsq(1), 3, 3, 0),
    ] {
        let mut r = Router::new(RouterConfig::new(servers(3), policy));
        for rid in 0..6 {
            r.handle_datagram(0, c, &req0(rid)).unwrap();
        }
        let out = drain(&mut r);
        assert_eq!(out.len(), sent, "{policy}");
        assert_eq!(r.waiting(), held, "{policy}");
        let o = r.outstanding();
        let (lo, hi) = (o.iter().min().unwrap(), o.iter().max().unwrap());
        assert_eq!(hi - lo, spread, "{policy}: {o:?}");
        assert!(out
            .iter()
            .all(|(_, origin, t)| *origin == c && *t == MsgType::Request));
    }
    let mut r = Router::new(RouterConfig::new(servers(3), Policy::Random));
    for rid in 0..60 {
        r.handle_datagram(0, c, &req0(rid)).unwrap();
    }
    drain(&mut r);
    assert!(
        r.stats().per_server.iter().all(|&n| n > 0),
        "{:?}",
        r.stats()
    );
}

#[test]
fn jbsq_sends_a_waiting_request_to_the_server_whose_feedback_freed_it() {
    let c = addr(1, 4000);
    let mut r = Router::new(RouterConfig::new(servers(2), Policy::Jbsq(1)));
    for rid in 0..4 {
        r.handle_datagram(0, c, &req0(rid)).unwrap();
    }
    let first = drain(&mut r);
    assert_eq!((first.len(), r.waiting()), (2, 2));
    assert_eq!(r.stats().queued, 2);
    // Server 1 finishes its request: the oldest waiting one goes there.
    let s1 = r.config().servers[1];
    let rid_at_s1 = if first[0].0 == s1 { 0 } else { 1 };
    r.handle_datagram(5, s1, &feedback(c, rid_at_s1)).unwrap();
    let next = drain(&mut r);
    assert_eq!(next.len(), 1);
    assert_eq!((next[0].0, r.waiting()), (s1, 1));
    assert_eq!(r.outstanding(), &[1, 1]);
    // The same FEEDBACK again, or from the wrong server, closes nothing.
    let s0 = r.config().servers[0];
    assert!(matches!(
        r.handle_datagram(6, s1, &feedback(c, rid_at_s1)),
        Err(RouterRecvError::UnknownFeedback { .. })
    ));
    assert!(matches!(
        r.handle_datagram(6, s0, &feedback(c, 2)),
        Err(RouterRecvError::UnknownFeedback { .. })
    ));
    assert_eq!(r.stats().feedbacks, 1);
    assert_eq!(r.stats().refused, 2);
}

#[test]
fn a_retransmitted_req0_goes_where_the_first_went_and_is_not_counted_twice() {
    let c = addr(1, 4000);
    let mut r = Router::new(RouterConfig::new(servers(4), Policy::Random));
    r.handle_datagram(0, c, &req0(7)).unwrap();
    let first = drain(&mut r)[0].0;
    for t in 1..20 {
        r.handle_datagram(t * MS, c, &req0(7)).unwrap();
        assert_eq!(drain(&mut r)[0].0, first);
    }
    assert_eq!(r.outstanding().iter().sum::<u32>(), 1);
    assert_eq!((r.stats().forwarded, r.stats().retransmits), (1, 19));
    // Another client's request with the same id is another request.
    let other = addr(2, 4000);
    r.handle_datagram(30 * MS, other, &req0(7)).unwrap();
    drain(&mut r);
    assert_eq!(r.stats().forwarded, 2);
    // After the FEEDBACK the server is remembered for `sticky_ns`, then
    // the identity is new again.
    r.handle_datagram(40 * MS, first, &feedback(c, 7)).unwrap();
    r.handle_datagram(41 * MS, c, &req0(7)).unwrap();
    assert_eq!(drain(&mut r)[0].0, first);
    let sticky = r.config().sticky_ns;
    r.handle_timeout(40 * MS + sticky);
    r.handle_datagram(40 * MS + sticky + 1, c, &req0(7))
        .unwrap();
    drain(&mut r);
    assert_eq!(r.stats().forwarded, 3);
    // A request waiting at the router is not queued twice.
    let mut r = Router::new(RouterConfig::new(servers(1), Policy::Jbsq(1)));
    r.handle_datagram(0, c, &req0(1)).unwrap();
    r.handle_datagram(0, c, &req0(2)).unwrap();
    r.handle_datagram(1, c, &req0(2)).unwrap();
    assert_eq!((r.waiting(), r.stats().duplicate_waiting), (1, 1));
}

#[test]
fn a_missing_feedback_stops_counting_after_its_timeout() {
    let c = addr(1, 4000);
    let mut cfg = RouterConfig::new(servers(1), Policy::Jbsq(1));
    cfg.feedback_timeout_ns = 10 * MS;
    let mut r = Router::new(cfg);
    r.handle_datagram(0, c, &req0(1)).unwrap();
    r.handle_datagram(1, c, &req0(2)).unwrap();
    assert_eq!((drain(&mut r).len(), r.waiting()), (1, 1));
    assert_eq!(r.poll_timeout(), Some(10 * MS));
    r.handle_timeout(10 * MS - 1);
    assert_eq!(r.waiting(), 1);
    r.handle_timeout(10 * MS);
    assert_eq!((drain(&mut r).len(), r.waiting()), (1, 0));
    assert_eq!(r.stats().feedback_timeouts, 1);
    assert_eq!(r.outstanding(), &[1]);
}

#[test]
fn full_tables_answer_drop() {
    let c = addr(1, 4000);
    let mut cfg = RouterConfig::new(servers(1), Policy::Jbsq(1));
    cfg.max_queued = 2;
    let mut r = Router::new(cfg);
    for rid in 0..4 {
        r.handle_datagram(0, c, &req0(rid)).unwrap();
    }
    let out = drain(&mut r);
    let kinds: Vec<MsgType> = out.iter().map(|o| o.2).collect();
    assert_eq!(kinds, [MsgType::Request, MsgType::Drop]);
    assert_eq!(out[1].0, c);
    assert_eq!((r.waiting(), r.stats().dropped), (2, 1));

    let mut cfg = RouterConfig::new(servers(2), Policy::Jsq);
    cfg.max_tracked = 3;
    let mut r = Router::new(cfg);
    for rid in 0..5 {
        r.handle_datagram(0, c, &req0(rid)).unwrap();
    }
    let kinds: Vec<MsgType> = drain(&mut r).iter().map(|o| o.2).collect();
    assert_eq!(kinds.iter().filter(|k| **k == MsgType::Drop).count(), 2);
}

#[test]
fn packets_the_router_does_not_route_are_refused_and_counted() {
    let c = addr(1, 4000);
    let mut r = Router::new(RouterConfig::new(servers(2), Policy::Jsq));
    let mut fixed = req0(1);
    fixed[2] = (MsgType::Request.as_u8() << 4) | 1;
    let reply = packet(MsgType::Response, 0, 1, 0, 1, b"x");
    let later = packet(MsgType::Request, 0, 1, 1, 3, b"x");
    let short_fb = {
        let mut b = feedback(c, 1);
        b.pop();
        b
    };
    let table: Vec<(&str, SocketAddrV4, Vec<u8>)> = vec![
        ("garbage", c, vec![1, 2, 3]),
        ("fixed route", c, fixed),
        ("reply", c, reply),
        ("later request packet", c, later),
        ("short feedback", r.config().servers[0], short_fb),
        ("feedback from a client", c, feedback(c, 1)),
    ];
    let n = table.len() as u64;
    for (what, from, bytes) in table {
        assert!(r.handle_datagram(0, from, &bytes).is_err(), "{what}");
    }
    assert_eq!(r.stats().refused, n);
    assert!(drain(&mut r).is_empty());
}

// ---------------------------------------------------------------------
// Simulation: clients, router and servers as cores, seeded.

/// What the simulated network carries: (to, from, bytes) at a time.
type Net = BTreeMap<(u64, u64), (SocketAddrV4, SocketAddrV4, Vec<u8>)>;

/// `requests` requests from 4 clients to 3 one-worker servers through the
/// router at 0.8 of their capacity, 1 % loss on every hop, 20–50 µs
/// delays, service 100 µs (90 %) or 1 ms (10 %). Checks that every
/// request completes once with its own reply and runs exactly once, and
/// under `jbsq:N` that no server ever held more than N; returns the
/// router's counters.
fn simulate(policy: Policy, seed: u64, requests: u64) -> RouterStats {
    let mut rng = SimRng::new(seed);
    let router_addr = addr(50, 9000);
    let srv = servers(3);
    let clients: Vec<SocketAddrV4> = (0..4).map(|i| addr(1 + i, 4000)).collect();
    let mut rcfg = RouterConfig::new(srv.clone(), policy);
    rcfg.seed = seed;
    // 20 times the longest service: a lost FEEDBACK (1 %) costs its server
    // a place for 20 ms, never longer than a client waits.
    rcfg.feedback_timeout_ns = 20_000_000;
    let mut router = Router::new(rcfg);
    let mut cores: Vec<Client> = clients
        .iter()
        .map(|&c| Client::new(ClientConfig::new(c)))
        .collect();
    let mut srv_cores: Vec<Server> = srv
        .iter()
        .map(|_| {
            Server::new(ServerConfig {
                feedback_to: Some(router_addr),
                ..ServerConfig::default()
            })
        })
        .collect();
    // Per server: requests taken and not answered, and the one running
    // with its end.
    let mut queues: Vec<VecDeque<ServerHandle>> = vec![VecDeque::new(); srv.len()];
    let mut running: Vec<Option<(ServerHandle, u64)>> = vec![None; srv.len()];
    let mut executed: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut done: HashMap<(usize, RequestHandle), Outcome> = HashMap::new();
    let mut sent_reqs: Vec<(usize, RequestHandle, Vec<u8>)> = Vec::new();
    let mut net: Net = BTreeMap::new();
    let mut seq = 0u64;
    let mut most = 0u32;
    let mut now = 0u64;
    let mut buf = [0u8; MAX_PACKET_LEN];
    let mut push = |net: &mut Net, rng: &mut SimRng, now: u64, to, from, b: &[u8]| {
        if rng.below(100) == 0 {
            return;
        }
        seq += 1;
        net.insert(
            (now + 20_000 + rng.below(30_000), seq),
            (to, from, b.to_vec()),
        );
    };
    while (sent_reqs.len() as u64) < requests || done.len() < sent_reqs.len() {
        // Mean service 190 µs on 3 servers: capacity one request per 63 µs;
        // 0.8 of it is one per 79 µs, p = 10/79 per 10 µs step.
        if (sent_reqs.len() as u64) < requests && rng.below(79) < 10 {
            let c = rng.below(clients.len() as u64) as usize;
            let body = format!("req {}", sent_reqs.len()).into_bytes();
            let h = cores[c].send_request(router_addr, &body, now).unwrap();
            sent_reqs.push((c, h, body));
        }
        while let Some((&(at, k), _)) = net.first_key_value() {
            if at > now {
                break;
            }
            let (to, from, bytes) = net.remove(&(at, k)).unwrap();
            if to == router_addr {
                let _ = router.handle_datagram(now, from, &bytes);
            } else if let Some(i) = srv.iter().position(|s| *s == to) {
                let _ = srv_cores[i].handle_datagram(now, from, &bytes);
            } else if let Some(i) = clients.iter().position(|c| *c == to) {
                let _ = cores[i].handle_datagram(now, from, &bytes);
            }
        }
        for i in 0..srv.len() {
            while let Some(inc) = srv_cores[i].poll_event() {
                queues[i].push_back(inc.handle);
            }
            if let Some((h, end)) = running[i] {
                if end <= now {
                    let body = srv_cores[i].request(h).unwrap().to_vec();
                    *executed.entry(body.clone()).or_default() += 1;
                    let mut reply = b"re: ".to_vec();
                    reply.extend_from_slice(&body);
                    srv_cores[i].respond(h, &reply, now).unwrap();
                    running[i] = None;
                }
            }
            if running[i].is_none() {
                if let Some(h) = queues[i].pop_front() {
                    let service = if rng.below(10) == 0 {
                        1_000_000
                    } else {
                        100_000
                    };
                    running[i] = Some((h, now + service));
                }
            }
            let held = queues[i].len() + usize::from(running[i].is_some());
            most = most.max(held as u32);
            srv_cores[i].handle_timeout(now);
        }
        router.handle_timeout(now);
        while let Some(f) = router.poll_transmit(&mut buf) {
            push(&mut net, &mut rng, now, f.dst, f.origin, &buf[..f.len]);
        }
        for (i, s) in srv_cores.iter_mut().enumerate() {
            while let Some(t) = s.poll_transmit(&mut buf) {
                push(&mut net, &mut rng, now, t.dst, srv[i], &buf[..t.len]);
            }
        }
        for (i, c) in cores.iter_mut().enumerate() {
            c.handle_timeout(now);
            while let Some(t) = c.poll_transmit(&mut buf) {
                push(&mut net, &mut rng, now, t.dst, clients[i], &buf[..t.len]);
            }
            while let Some(d) = c.poll_event() {
                assert!(
                    done.insert((i, d.handle), d.outcome).is_none(),
                    "completed twice"
                );
            }
        }
        now += 10_000;
        assert!(now < 10_000_000_000, "{policy} seed {seed}: did not finish");
    }
    for (c, h, body) in &sent_reqs {
        match done[&(*c, *h)] {
            Outcome::Reply => {
                let mut want = b"re: ".to_vec();
                want.extend_from_slice(body);
                assert_eq!(cores[*c].reply(*h), Some(&want[..]), "{policy}");
            }
            o => panic!(
                "{policy} seed {seed}: {:?} ended {o:?}",
                String::from_utf8_lossy(body)
            ),
        }
    }
    assert_eq!(executed.len() as u64, requests, "{policy}");
    assert!(
        executed.values().all(|&n| n == 1),
        "{policy}: a request ran twice"
    );
    if let Policy::Jbsq(n) = policy {
        assert!(most <= n, "{policy} seed {seed}: a server held {most}");
    }
    assert!(router.stats().forwarded >= requests, "{:?}", router.stats());
    router.stats().clone()
}

#[test]
fn every_request_is_answered_once_under_every_policy_with_loss() {
    for policy in [
        Policy::Random,
        Policy::RoundRobin,
        Policy::Jsq,
        Policy::Jbsq(1),
        Policy::Jbsq(2),
    ] {
        let (mut queued, mut again) = (0, 0);
        for seed in 1..=2 {
            let s = simulate(policy, seed, 400);
            queued += s.queued;
            again += s.retransmits + s.duplicate_waiting + s.feedback_timeouts;
        }
        // The loss paths ran, and JBSQ held requests back.
        assert!(again > 0, "{policy}: no retransmission reached the router");
        assert_eq!(
            queued > 0,
            matches!(policy, Policy::Jbsq(_)),
            "{policy}: {queued} queued"
        );
    }
}

/// A server that refuses a forwarded request (full) sends the client its
/// DROP and the router a FEEDBACK, so the router stops counting the
/// request at once instead of after its FEEDBACK timeout.
#[test]
fn a_server_drop_frees_the_routers_place() {
    let c = addr(1, 4000);
    let router_addr = addr(50, 9000);
    let srv = servers(1);
    let mut router = Router::new(RouterConfig::new(srv.clone(), Policy::Jbsq(2)));
    let mut server = Server::new(ServerConfig {
        max_requests: 1,
        feedback_to: Some(router_addr),
        ..ServerConfig::default()
    });
    let mut buf = [0u8; MAX_PACKET_LEN];
    for rid in 0..2 {
        router.handle_datagram(0, c, &req0(rid)).unwrap();
        while let Some(f) = router.poll_transmit(&mut buf) {
            assert!(f.forwarded);
            let _ = server.handle_datagram(1, f.origin, &buf[..f.len]);
        }
    }
    assert_eq!(router.outstanding(), &[2]);
    let mut kinds = Vec::new();
    while let Some(t) = server.poll_transmit(&mut buf) {
        let p = Packet::new_checked(&buf[..t.len]).unwrap();
        kinds.push((p.msg_type(), t.dst));
        if t.dst == router_addr {
            router.handle_datagram(2, srv[0], &buf[..t.len]).unwrap();
        }
    }
    assert_eq!(
        kinds,
        [(MsgType::Drop, c), (MsgType::Feedback, router_addr)]
    );
    assert_eq!(router.outstanding(), &[1]);
    assert_eq!(router.stats().feedbacks, 1);
}

/// A router over two servers with admission control for p99 ≤ 1 ms,
/// updated every 10 ms, classes in `never_drop` (a bit each) never dropped.
fn admitting_with(controller: xlane_rpc::admission::ControllerKind, never_drop: u16) -> Router {
    Router::new(RouterConfig {
        admission: Some(xlane_rpc::router::AdmissionConfig {
            period_ns: 10 * MS,
            never_drop,
            ..xlane_rpc::router::AdmissionConfig::new("p99=1ms".parse().unwrap(), controller)
        }),
        // Requests held open in a test stay outstanding.
        feedback_timeout_ns: 60_000 * MS,
        ..RouterConfig::new(servers(2), Policy::Random)
    })
}

fn admitting(controller: xlane_rpc::admission::ControllerKind) -> Router {
    admitting_with(controller, 0)
}

/// `n` requests from `c`, each closed by its server's FEEDBACK `lat` after
/// its REQ0, from `t`; returns how many were forwarded (the rest got DROP).
fn exchange(r: &mut Router, c: SocketAddrV4, rid0: u16, n: u16, t: u64, lat: u64) -> usize {
    exchange_class(r, c, 0, rid0, n, t, lat)
}

/// [`exchange`] for requests of class `class` (their policy value).
fn exchange_class(
    r: &mut Router,
    c: SocketAddrV4,
    class: u8,
    rid0: u16,
    n: u16,
    t: u64,
    lat: u64,
) -> usize {
    let mut forwarded = 0;
    for k in 0..n {
        let rid = rid0.wrapping_add(k);
        r.handle_datagram(t, c, &packet(MsgType::Request, class, rid, 0, 1, b"hello"))
            .unwrap();
        for (dst, _, ty) in drain(r) {
            if ty == MsgType::Request {
                forwarded += 1;
                r.handle_datagram(t + lat, dst, &feedback(c, rid)).unwrap();
            } else {
                assert_eq!((dst, ty), (c, MsgType::Drop));
            }
        }
    }
    forwarded
}

#[test]
fn the_cap_turns_requests_away_once_latency_breaks_the_slo() {
    use xlane_rpc::admission::ControllerKind;
    let mut r = admitting(ControllerKind::CAP);
    let c = addr(1, 5000);
    // Latencies within the SLO: everything goes through, the bound stays.
    let mut t = 0;
    for p in 0..5u16 {
        assert_eq!(exchange(&mut r, c, p * 100, 50, t, 100_000), 50);
        t += 10 * MS;
        r.handle_timeout(t);
    }
    let first = r.admission(0).unwrap().cap().unwrap();
    // 20 periods of 5 ms latencies, with 40 requests held open (the queue
    // the bound is measured against): the bound shrinks below 40, and new
    // requests get DROP.
    for k in 0..40u16 {
        r.handle_datagram(t, c, &req0(10_000 + k)).unwrap();
    }
    assert_eq!(drain(&mut r).len(), 40);
    for p in 0..20u16 {
        exchange(&mut r, addr(2, 5000), 20_000 + p * 10, 10, t, 5 * MS);
        t += 10 * MS;
        r.handle_timeout(t);
    }
    let cap = r.admission(0).unwrap().cap().unwrap();
    assert!(cap < first && cap < 40, "bound {first} then {cap}");
    assert_eq!(exchange(&mut r, addr(3, 5000), 30_000, 5, t, 100_000), 0);
    assert!(r.stats().admission_drops >= 5);
    assert_eq!(r.stats().dropped, 0, "admission drops are counted apart");
}

#[test]
fn aiad_drops_a_growing_share_while_the_slo_is_broken() {
    use xlane_rpc::admission::ControllerKind;
    let mut r = admitting(ControllerKind::AIAD);
    let c = addr(1, 5000);
    let mut t = 0;
    // 50 periods of 5 ms latencies: the drop rate climbs by 0.01 a period.
    for p in 0..50u16 {
        exchange(&mut r, c, p * 20, 20, t, 5 * MS);
        t += 10 * MS;
        r.handle_timeout(t);
    }
    let dr = r.admission(0).unwrap().drop_rate();
    assert!((0.45..=0.51).contains(&dr), "{dr}");
    let before = r.stats().admission_drops;
    let through = exchange(&mut r, c, 5000, 1000, t, 5 * MS);
    let dropped = r.stats().admission_drops - before;
    assert_eq!(through as u64 + dropped, 1000);
    // About half, from the seeded coin.
    assert!((400..=600).contains(&dropped), "{dropped}");
}

/// Request classes (the REQ0's policy value) are controlled apart: a class
/// whose latency breaks the SLO is dropped while another class's requests
/// still pass, and a never-drop class passes whatever its latency.
#[test]
fn classes_have_their_own_controllers_and_never_drop_classes_pass() {
    use xlane_rpc::admission::ControllerKind;
    // Class 3 never dropped.
    let mut r = admitting_with(ControllerKind::AIAD, 1 << 3);
    let c = addr(1, 5000);
    let mut t = 0;
    // 60 periods: class 2 at 5 ms (breaks p99 ≤ 1 ms), class 0 at 0.1 ms,
    // class 3 at 5 ms.
    for p in 0..60u16 {
        exchange_class(&mut r, c, 2, p * 30, 10, t, 5 * MS);
        exchange_class(&mut r, c, 0, p * 30 + 10, 10, t, 100_000);
        assert_eq!(exchange_class(&mut r, c, 3, p * 30 + 20, 10, t, 5 * MS), 10);
        t += 10 * MS;
        r.handle_timeout(t);
    }
    let rate = |r: &Router, k: u8| r.admission(k).unwrap().drop_rate();
    assert!(rate(&r, 2) > 0.4, "class 2: {}", rate(&r, 2));
    assert_eq!(rate(&r, 0), 0.0);
    // Class 3's own controller may want to drop; the class passes anyway.
    assert!(rate(&r, 3) > 0.4, "class 3: {}", rate(&r, 3));
    let s = r.stats();
    assert_eq!(s.admission_drops_by_class[0], 0);
    assert_eq!(s.admission_drops_by_class[3], 0);
    assert!(s.admission_drops_by_class[2] > 0);
    assert_eq!(
        s.admission_drops,
        s.admission_drops_by_class.iter().sum::<u64>()
    );
    assert_eq!(s.requests_by_class[0], 600);
    assert_eq!(s.requests_by_class[2], 600);
    // FIXED_ROUTE has no class: refused at the router, no controller.
    assert!(r.admission(1).is_none());
    assert!(r.admission(16).is_none());
    assert_eq!(
        r.handle_datagram(t, c, &packet(MsgType::Request, 1, 9, 0, 1, b"x")),
        Err(xlane_rpc::router::RouterRecvError::Policy(1))
    );
}
