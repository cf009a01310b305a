//! Authenticated raft datagrams (`xlane kv serve --key-file`) against a
//! forger: a three-member group shares a key; one follower is killed
//! (`kill -9`), and from its raft address, now free, a forger sends the
//! leader and the other follower what would take the group over: append
//! messages from the dead member as leader of a far higher term, as bare
//! raft fragments and sealed under a key the group does not hold. Nothing
//! changes: no member takes a forged term, writes go on, the data is
//! intact, and each target counted the forgeries as unauthenticated. The
//! same over the lane (`--transport lane --key-file`): every frame is
//! sealed, the group elects and replicates, and frames sent bare from a
//! dead member's addresses are counted and change nothing. No time is
//! asserted.

mod common;

use common::procs::{Procs, Shard};
use common::Conn;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;
use xlane_kv::resp::Reply;
use xlane_xraft::raft::eraftpb::MessageType;
use xlane_xraft::Message;

#[test]
fn forged_raft_messages_from_a_dead_members_address_change_nothing() {
    let root = std::env::temp_dir().join(format!("xlane-kv-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let keys = common::procs::key_file(&root);
    let mut shard = Shard::new(&root, 0);
    let mut procs = Procs::default();
    for id in 1..=3 {
        let mut cmd = shard.command(id);
        cmd.arg("--key-file").arg(&keys);
        shard.procs.push(procs.start(&format!("n{id}"), &mut cmd));
    }
    let leader = shard.leader().expect("a leader under authenticated raft");
    let mut c = Conn::open(shard.clients[leader]);
    assert_eq!(c.cmd(&["SET", "k", "before"]), Reply::ok());
    // Kill a follower; the forger takes its raft address.
    let dead = (0..3).find(|&i| i != leader).unwrap();
    let other = (0..3).find(|&i| i != leader && i != dead).unwrap();
    procs.kill(shard.procs[dead]);
    let forger = UdpSocket::bind(shard.raft_addr(dead)).expect("the dead member's address");
    let foreign = xlane_auth::Key::random().unwrap();
    let mut sealer = xlane_auth::Sealer::new(1, foreign, dead as u32 + 1);
    let mut frag = xlane_xraft::batch::Fragmenter::new(1376, 1).unwrap();
    let mut forged = 0u64;
    for round in 0..200u64 {
        for target in [leader, other] {
            let mut m = Message::default();
            m.set_msg_type(MessageType::MsgAppend);
            m.set_from(dead as u64 + 1);
            m.set_to(target as u64 + 1);
            m.set_term(1_000 + round);
            m.set_commit(0);
            let bytes = xlane_xraft::batch::encode_message(&m).unwrap();
            for f in frag.fragment(&bytes).unwrap() {
                let to = shard.raft_addr(target);
                forger.send_to(&f, to).unwrap();
                let mut sealed = f.clone();
                sealed.resize(f.len() + xlane_auth::TRAILER_LEN, 0);
                let n = sealer
                    .seal(&mut sealed, f.len(), target as u32 + 1, round + 1)
                    .unwrap();
                forger.send_to(&sealed[..n], to).unwrap();
                forged += 2;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // None of the forged terms took. Whichever member leads now (a stall
    // of this machine may have moved leadership by a genuine election),
    // writes go on, the data is intact, and every member's term stays far
    // below the forged ones, which would have carried the next leader's
    // term past 1 000.
    let now = shard.leader().expect("a leader after the forgeries");
    let mut c = Conn::open(shard.clients[now]);
    assert_eq!(c.cmd(&["GET", "k"]), Reply::Bulk(Some(b"before".to_vec())));
    assert_eq!(c.cmd(&["SET", "k", "after"]), Reply::ok());
    for i in [leader, other] {
        let Reply::Bulk(Some(info)) = Conn::open(shard.clients[i]).cmd(&["INFO"]) else {
            panic!("INFO of member {}", i + 1);
        };
        let info = String::from_utf8_lossy(&info);
        let term: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("xlane_leader_term:"))
            .expect("xlane_leader_term in INFO")
            .trim()
            .parse()
            .unwrap();
        assert!(term < 1_000, "member {} took a forged term: {term}", i + 1);
    }
    let mut unauthenticated = 0;
    for i in [leader, other] {
        let stopped = procs.terminate(shard.procs[i]);
        let udp = &stopped["detail"]["raft_udp"];
        let n = udp["unauthenticated"].as_u64().expect("counted");
        assert!(n > 0, "member {} counted no forgery: {stopped}", i + 1);
        assert!(udp["received"].as_u64().unwrap() > 0, "{stopped}");
        unauthenticated += n;
    }
    assert!(unauthenticated <= forged, "{unauthenticated} > {forged}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn sealed_lane_frames_carry_the_group_and_bare_ones_are_refused() {
    let root = std::env::temp_dir().join(format!("xlane-kv-auth-lane-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let keys = common::procs::key_file(&root);
    let mut shard = Shard::new(&root, 1);
    let mut procs = Procs::default();
    for id in 1..=3 {
        let mut cmd = shard.command(id);
        cmd.args(["--transport", "lane", "--key-file"]).arg(&keys);
        shard.procs.push(procs.start(&format!("l{id}"), &mut cmd));
    }
    let leader = shard.leader().expect("a leader over sealed lane frames");
    let mut c = Conn::open(shard.clients[leader]);
    assert_eq!(c.cmd(&["SET", "k", "before"]), Reply::ok());
    let dead = (0..3).find(|&i| i != leader).unwrap();
    let other = (0..3).find(|&i| i != leader && i != dead).unwrap();
    procs.kill(shard.procs[dead]);
    // From the dead member's replication and X-FD addresses, frames
    // without a MAC to both ports of the two others.
    let repl = shard.raft_addr(dead);
    let fd = SocketAddr::new(repl.ip(), repl.port() + 1);
    let socks = [UdpSocket::bind(repl).unwrap(), UdpSocket::bind(fd).unwrap()];
    let mut bare = 0u64;
    for round in 0..100u8 {
        for target in [leader, other] {
            let to = shard.raft_addr(target);
            for (s, port) in socks.iter().zip([to.port(), to.port() + 1]) {
                let frame = [b'X', b'L', 1, round, 0, 0, 0, 0, 0, 0, 0, 1];
                s.send_to(&frame, SocketAddr::new(to.ip(), port)).unwrap();
                bare += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let now = shard.leader().expect("a leader after the bare frames");
    let mut c = Conn::open(shard.clients[now]);
    assert_eq!(c.cmd(&["GET", "k"]), Reply::Bulk(Some(b"before".to_vec())));
    assert_eq!(c.cmd(&["SET", "k", "after"]), Reply::ok());
    let mut refused = 0;
    for i in [leader, other] {
        let stopped = procs.terminate(shard.procs[i]);
        let lane = &stopped["detail"]["raft_lane"];
        let n = lane["unauthenticated"].as_u64().expect("counted");
        assert!(n > 0, "member {} counted no bare frame: {stopped}", i + 1);
        assert!(lane["frames_received"].as_u64().unwrap() > 0, "{stopped}");
        refused += n;
    }
    assert!(
        refused <= bare,
        "{refused} > {bare}: genuine frames refused"
    );
    let _ = std::fs::remove_dir_all(&root);
}
