//! The batch against real loopback sockets, IPv4 and IPv6.

use super::*;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Datagrams per read in these tests (fewer than [`RECV_BATCH`], to read
/// a queue in several batches).
const SLOTS: usize = 8;

#[test]
fn reads_what_waits_with_senders_v4_and_v6() {
    for (bind, peer) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
        let Ok(rx) = UdpSocket::bind(bind) else {
            continue; // no IPv6 loopback here
        };
        let tx = UdpSocket::bind(peer).unwrap();
        let to = rx.local_addr().unwrap();
        let mut b = RecvBatch::with_capacity(SLOTS, 64);
        assert_eq!(b.recv(rx.as_raw_fd()).unwrap(), 0, "{bind}: empty");
        assert!(b.datagram(0).is_none());
        let sent: Vec<Vec<u8>> = (0..SLOTS + 3).map(|i| vec![i as u8; i + 1]).collect();
        for d in &sent {
            tx.send_to(d, to).unwrap();
        }
        // Loopback delivers at once; read until all came (two batches).
        let mut got = Vec::new();
        for _ in 0..1000 {
            let n = b.recv(rx.as_raw_fd()).unwrap();
            for i in 0..n {
                let (src, bytes) = b.datagram(i).unwrap();
                assert_eq!(src, Some(tx.local_addr().unwrap()), "{bind}");
                got.push(bytes.to_vec());
            }
            if got.len() == sent.len() {
                break;
            }
        }
        assert_eq!(got, sent, "{bind}");
        // A datagram longer than a buffer is cut to it.
        tx.send_to(&[7u8; 100], to).unwrap();
        let mut n = 0;
        for _ in 0..1000 {
            n = b.recv(rx.as_raw_fd()).unwrap();
            if n > 0 {
                break;
            }
        }
        assert_eq!(n, 1);
        assert_eq!(b.datagram(0).unwrap().1.len(), 64);
        assert!(b.meta(0).unwrap().truncated, "{bind}: marked cut");
    }
}

#[test]
fn a_queue_leaves_in_order_to_each_address() {
    for bind in ["127.0.0.1:0", "[::1]:0"] {
        let Ok(tx) = UdpSocket::bind(bind) else {
            continue; // no IPv6 loopback here
        };
        let rx: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind(bind).unwrap()).collect();
        let mut q = SendQueue::default();
        // More than one sendmmsg's worth, spread over three receivers.
        for i in 0..(SEND_BATCH + 4) {
            q.push(rx[i % 3].local_addr().unwrap(), vec![i as u8; i + 1]);
        }
        assert_eq!(q.flush(tx.as_raw_fd()), (SEND_BATCH + 4, 0), "{bind}");
        assert_eq!(q.flush(tx.as_raw_fd()), (0, 0), "{bind}: emptied");
        for (r, sock) in rx.iter().enumerate() {
            let mut b = RecvBatch::with_capacity(SLOTS, 64);
            let mut got = Vec::new();
            for _ in 0..1000 {
                let n = b.recv(sock.as_raw_fd()).unwrap();
                got.extend((0..n).map(|i| b.datagram(i).unwrap().1.to_vec()));
                if n == 0 && !got.is_empty() {
                    break;
                }
            }
            let want: Vec<Vec<u8>> = (0..(SEND_BATCH + 4))
                .filter(|i| i % 3 == r)
                .map(|i| vec![i as u8; i + 1])
                .collect();
            assert_eq!(got, want, "{bind}: receiver {r}");
        }
    }
}
