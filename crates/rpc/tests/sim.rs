//! A client and a server core exchanging many single- and multi-packet
//! requests through a seeded simulated network that loses 1 % of the packets
//! in each direction and duplicates and reorders some. Every request must be
//! answered exactly once with the right reply, and executed at most once.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use xlane_lane::sim::SimRng;
use xlane_rpc::wire::{MAX_PACKET_LEN, MAX_PAYLOAD};
use xlane_rpc::{Client, ClientConfig, Outcome, Server, ServerConfig, ServerHandle};

const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 8000);

/// (arrival time, sequence, to, from, bytes)
type InFlight = (u64, u64, SocketAddrV4, SocketAddrV4, Vec<u8>);

struct Net {
    rng: SimRng,
    loss: f64,
    dup: f64,
    min_delay: u64,
    max_delay: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<InFlight>>,
    sent: u64,
    lost: u64,
    duplicated: u64,
}

impl Net {
    fn send(&mut self, now: u64, from: SocketAddrV4, to: SocketAddrV4, bytes: &[u8]) {
        self.sent += 1;
        if self.rng.chance(self.loss) {
            self.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.dup) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + self.rng.range(self.min_delay, self.max_delay);
            self.seq += 1;
            self.queue
                .push(Reverse((at, self.seq, to, from, bytes.to_vec())));
        }
    }

    fn next_at(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse(d)| d.0)
    }
}

/// Request `tag`: its length and bytes (the tag first, then a pattern).
fn request_bytes(rng: &mut SimRng, tag: u64) -> Vec<u8> {
    let len = match rng.below(10) {
        0..=6 => 8 + rng.below(300) as usize,
        7 | 8 => MAX_PAYLOAD + 1 + rng.below(4000) as usize,
        _ => 8 + rng.below(20_000) as usize,
    };
    let mut v: Vec<u8> = (0..len).map(|i| (i as u64 ^ tag) as u8).collect();
    v[..8].copy_from_slice(&tag.to_be_bytes());
    v
}

/// The reply the server computes for a request (length depends on the tag).
fn reply_for(request: &[u8]) -> Vec<u8> {
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&request[..8]);
    let tag = u64::from_be_bytes(tag);
    let len = 8 + (tag * 7919 % 9000) as usize;
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(tag) as u8)
        .collect();
    v[..8].copy_from_slice(&(request.len() as u64).to_be_bytes());
    v
}

/// `server_cfg`: `None` for the default (room for everything); with a small
/// server some requests are refused with DROP.
fn run(seed: u64, requests: u64, server_cfg: Option<ServerConfig>) {
    let mut rng = SimRng::new(seed);
    let mut net = Net {
        rng: SimRng::new(seed ^ 0x5EED),
        loss: 0.01,
        dup: 0.005,
        min_delay: 20_000,
        max_delay: 400_000,
        seq: 0,
        queue: BinaryHeap::new(),
        sent: 0,
        lost: 0,
        duplicated: 0,
    };
    let mut client = Client::new(ClientConfig {
        max_in_flight: 32,
        // Below the small server's reply hold, as docs/rpc.md requires.
        request_timeout_ns: if server_cfg.is_some() {
            20_000_000
        } else {
            500_000_000
        },
        ..ClientConfig::new(CLIENT)
    });
    let small = server_cfg.is_some();
    let mut server = Server::new(server_cfg.unwrap_or_default());
    let mut dropped = 0u64;
    let mut buf = vec![0u8; MAX_PACKET_LEN];

    let mut now = 0u64;
    let mut next_tag = 0u64;
    let mut next_send = 0u64;
    // tag -> (request bytes, handle); completions seen per tag.
    let mut sent: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut by_handle = HashMap::new();
    let mut completed: HashMap<u64, u32> = HashMap::new();
    let mut executions: HashMap<u64, u32> = HashMap::new();
    let mut service: BinaryHeap<Reverse<(u64, u64, ServerHandle)>> = BinaryHeap::new();
    let mut service_seq = 0u64;
    let (mut multi_req, mut multi_rep) = (0, 0);

    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps < 50_000_000, "seed {seed}: no progress");
        // Open-loop arrivals every ~30 µs while there is room.
        if next_tag < requests && now >= next_send && client.in_flight() < 32 {
            let req = request_bytes(&mut rng, next_tag);
            if req.len() > MAX_PAYLOAD {
                multi_req += 1;
            }
            let h = client
                .send_request(SERVER, &req, now)
                .unwrap_or_else(|e| panic!("seed {seed}: send: {e}"));
            by_handle.insert(h, next_tag);
            sent.insert(next_tag, req);
            next_tag += 1;
            next_send = now
                + if small {
                    rng.range(100_000, 300_000)
                } else {
                    rng.range(5_000, 60_000)
                };
        }
        // Deliver what is due.
        while net.next_at().is_some_and(|t| t <= now) {
            let Reverse((_, _, to, from, bytes)) = net.queue.pop().unwrap();
            if to == SERVER {
                let _ = server.handle_datagram(now, from, &bytes);
            } else {
                let _ = client.handle_datagram(now, from, &bytes);
            }
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
        // The application: execute each request after a short service time.
        while let Some(inc) = server.poll_event() {
            let req = server.request(inc.handle).expect("request readable");
            let mut tag = [0u8; 8];
            tag.copy_from_slice(&req[..8]);
            let tag = u64::from_be_bytes(tag);
            assert_eq!(
                sent.get(&tag).map(|v| &v[..]),
                Some(req),
                "seed {seed}: request {tag} arrived corrupted"
            );
            *executions.entry(tag).or_default() += 1;
            service_seq += 1;
            service.push(Reverse((
                now + rng.range(0, 200_000),
                service_seq,
                inc.handle,
            )));
        }
        while service.peek().is_some_and(|Reverse(s)| s.0 <= now) {
            let Reverse((_, _, h)) = service.pop().unwrap();
            let reply = reply_for(server.request(h).unwrap());
            if reply.len() > MAX_PAYLOAD {
                multi_rep += 1;
            }
            server.respond(h, &reply, now).unwrap();
        }
        while let Some(t) = client.poll_transmit(&mut buf) {
            net.send(now, CLIENT, t.dst, &buf[..t.len]);
        }
        while let Some(t) = server.poll_transmit(&mut buf) {
            net.send(now, SERVER, t.dst, &buf[..t.len]);
        }
        while let Some(c) = client.poll_event() {
            let tag = by_handle[&c.handle];
            *completed.entry(tag).or_default() += 1;
            if small && c.outcome == Outcome::Dropped {
                dropped += 1;
                assert_eq!(client.reply(c.handle), None);
            } else {
                assert_eq!(c.outcome, Outcome::Reply, "seed {seed}: request {tag}");
                let want = reply_for(&sent[&tag]);
                assert!(
                    client.reply(c.handle) == Some(&want[..]),
                    "seed {seed}: wrong reply for {tag}"
                );
                // A replied request ran exactly once.
                assert_eq!(executions.get(&tag), Some(&1), "seed {seed}: {tag}");
            }
            assert!(client.release(c.handle, now));
        }
        if next_tag == requests && completed.len() as u64 == requests {
            break;
        }
        // Jump to the next thing that happens.
        let mut next = [
            net.next_at(),
            client.poll_timeout(),
            server.poll_timeout(),
            service.peek().map(|Reverse(s)| s.0),
            (next_tag < requests).then_some(next_send),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(now + 1);
        if next <= now {
            next = now + 1;
        }
        now = next;
    }

    for tag in 0..requests {
        assert_eq!(completed.get(&tag), Some(&1), "seed {seed}: request {tag}");
        // At most once, always; exactly once unless refused.
        let runs = executions.get(&tag).copied().unwrap_or(0);
        assert!(runs <= 1, "seed {seed}: request {tag} ran {runs} times");
        if !small {
            assert_eq!(runs, 1, "seed {seed}: request {tag}");
        }
    }
    let (cs, ss) = (client.stats(), server.stats());
    println!(
        "seed {seed}: {cs:?}\n{ss:?}\nnet sent {} lost {} duplicated {}",
        net.sent, net.lost, net.duplicated
    );
    // The run exercised what it claims to.
    assert!(net.lost > 0 && net.duplicated > 0, "seed {seed}");
    assert!(multi_req > 0 && multi_rep > 0, "seed {seed}");
    assert!(cs.retransmissions > 0, "seed {seed}");
    if !small {
        assert!(
            ss.duplicate_requests + ss.duplicate_packets > 0,
            "seed {seed}"
        );
    }
    assert_eq!(cs.timed_out, 0, "seed {seed}");
    assert_eq!(cs.replies + cs.dropped, requests, "seed {seed}");
    assert_eq!(cs.dropped, dropped, "seed {seed}");
    if small {
        assert!(
            dropped > 0 && cs.replies > 0,
            "seed {seed}: {dropped} dropped"
        );
        assert!(ss.dropped_full > 0, "seed {seed}");
    } else {
        assert_eq!(ss.executed, requests, "seed {seed}");
        assert_eq!(cs.replies, requests, "seed {seed}");
    }
}

#[test]
fn every_request_answered_once_under_loss() {
    for seed in 1..=4 {
        run(seed, 2_000, None);
    }
}

/// A server with room for 64 requests, replies held 25 ms, offered about
/// twice what that lets it take: some requests get DROP (a lost DROP is
/// asked again by the retransmitted REQ0). Every request still completes
/// exactly once, as a reply or a drop, and none runs twice.
#[test]
fn a_full_server_drops_and_every_request_still_completes_once() {
    let cfg = ServerConfig {
        max_requests: 64,
        reply_hold_ns: 25_000_000,
        ..ServerConfig::default()
    };
    for seed in 11..=12 {
        run(seed, 1_000, Some(cfg));
    }
}
