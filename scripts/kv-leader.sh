#!/usr/bin/env bash
# A three-member xlane kv cluster on loopback whose leader serves RESP on PORT: what
# scripts/redis-suite.sh gives Redis's test suite as "the server" (--server-cmd).
#
# Usage: scripts/kv-leader.sh PORT [XLANE_BIN]
#
# Member 1 starts alone (a one-member Raft group elects itself at once, so it leads before
# the first request), then members 2 and 3 join (--join, RAFT.NODE ADD) and catch up from
# it. Their RESP ports are PORT+1 and PORT+2, their raft ports PORT+10000..+10002 (PORT-10000..
# -9998 when those would pass 65535: the suite's runner picks PORT up to 60999). Every
# member's log is in /dev/shm (--ram-disk). On SIGTERM/SIGINT/exit the members this script
# started, and only those, are stopped by PID; if this script is killed outright (the suite's
# runner sends SIGKILL), each member gets SIGTERM from the kernel (setpriv --pdeathsig).
set -euo pipefail
port=${1:?usage: kv-leader.sh PORT [XLANE_BIN]}
bin=${2:-${XLANE_BIN:-$(dirname "$0")/../target/release/xlane}}
if [ $((port + 10002)) -le 65535 ]; then raft=$((port + 10000)); else raft=$((port - 10000)); fi
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT
# The members' logs (--ram-disk) go when they have stopped, even after a SIGKILL of this script.
( while kill -0 $$ 2>/dev/null; do sleep 1; done
  sleep 2
  for id in 1 2 3; do rm -rf "/dev/shm/xlane-kv-$id-$((raft + id - 1))"; done ) &
trap 'exit 0' TERM INT

peer() { echo "$1=127.0.0.1:$((raft + $1 - 1))/127.0.0.1:$((port + $1 - 1))"; }

member() { setpriv --pdeathsig TERM -- "$bin" kv serve "$@" >/dev/null 2>&1 & }

member --id 1 --peer "$(peer 1)" --ram-disk
pids+=($!)
# Wait until member 1 leads (it answers writes), at most 10 s.
for _ in $(seq 100); do
    if [ "$(redis-cli -p "$port" set __xlane_leader_probe 1 2>/dev/null)" = OK ]; then break; fi
    sleep 0.1
done
redis-cli -p "$port" del __xlane_leader_probe >/dev/null
for id in 2 3; do
    member --id "$id" --peer "$(peer 1)" --peer "$(peer "$id")" --join --ram-disk
    pids+=($!)
    # Added only once it listens (raft's TCP port): a voter that does not answer would cost
    # member 1 its quorum, and its lead.
    for _ in $(seq 100); do
        (echo > "/dev/tcp/127.0.0.1/$((raft + id - 1))") 2>/dev/null && break
        sleep 0.1
    done
    redis-cli -p "$port" raft.node add "$id" "127.0.0.1:$((raft + id - 1))/127.0.0.1:$((port + id - 1))" >/dev/null
done
# Each member answers once it has caught up.
for id in 2 3; do
    for _ in $(seq 100); do
        if redis-cli -p "$((port + id - 1))" ping >/dev/null 2>&1; then break; fi
        sleep 0.1
    done
done
wait "${pids[0]}"
