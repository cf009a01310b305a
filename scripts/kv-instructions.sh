#!/usr/bin/env bash
# CPU cost per request of xlane kv (one node) and the real redis-server, counted in instructions
# (valgrind's callgrind): a count that does not move with the machine's noise, so the two can be
# compared exactly on a busy or virtual machine. Each server runs alone under callgrind, once idle
# (start and stop only) and once through redis-benchmark's test; the difference divided by the
# requests is the server's user-space instructions per request (the kernel's work is not counted:
# both make the same kinds of socket calls).
#
# Usage: scripts/kv-instructions.sh [--bin XLANE] [--tests "get set ..."] [--requests N]
#                                   [--pipeline P]
#   --tests     redis-benchmark -t names (default: get set incr lpush sadd hset zadd lrange_100),
#               and `eval`/`evalsha`: a script that INCRs one key, sent with EVAL, or loaded
#               first (SCRIPT LOAD) and sent with EVALSHA
#   --requests  requests per test (default 100000; callgrind runs a server about 50x slower)
#   --pipeline  requests pipelined per connection (default 16; 50 connections)
# Both servers persist as in `xlane bench kv --workload redis-benchmark`: xlane kv with
# `--fsync everysec`, Redis with `--appendonly yes --appendfsync everysec`, each in a directory
# of this run under /dev/shm, removed at exit. Needs valgrind, redis-server, redis-cli and
# redis-benchmark.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/target/release/xlane
tests="get set incr lpush sadd hset zadd lrange_100"
requests=100000
pipeline=16
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$(readlink -f "$2"); shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --pipeline) pipeline=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for n in "$requests" "$pipeline"; do
    case $n in ''|*[!0-9]*|0) echo "--requests and --pipeline want positive numbers, not '$n'" >&2; exit 2 ;; esac
done
for tool in valgrind callgrind_annotate redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || { echo "$tool not found on PATH" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "no xlane binary at $bin (cargo build --release, or --bin)" >&2; exit 1; }
work=$(mktemp -d /dev/shm/xlane-instructions-XXXXXX)
pid=""
cleanup() {
    # Only the server this script started, by its PID.
    if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on (loopback, 18000-18999).
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((18000 + RANDOM % 1000))
        if ! redis-cli -p "$p" ping >/dev/null 2>&1; then echo "$p"; return; fi
    done
    echo "no free port in 18000-18999" >&2
    exit 1
}

# Instructions of one server run: $1 system (xlane|redis), $2 test ('' for idle).
count() {
    local system=$1 test=$2 port dir out
    port=$(free_port)
    dir=$work/$system-${test:-idle}
    mkdir -p "$dir"
    out=$dir/callgrind.out
    if [ "$system" = xlane ]; then
        valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" kv serve \
            --bind "127.0.0.1:$port" --data "$dir/data" --fsync everysec >"$dir/log" 2>&1 &
    else
        valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$port" \
            --bind 127.0.0.1 --appendonly yes --appendfsync everysec --save '' --dir "$dir" \
            --daemonize no >"$dir/log" 2>&1 &
    fi
    pid=$!
    local up=0
    for _ in $(seq 1 300); do
        if redis-cli -p "$port" ping >/dev/null 2>&1; then up=1; break; fi
        sleep 0.2
    done
    [ $up = 1 ] || { echo "$system did not start under valgrind (see $dir/log)" >&2; cat "$dir/log" >&2; exit 1; }
    if [ -n "$test" ]; then
        local errors cmd=(-t "$test")
        case $test in
            eval) cmd=(eval "$script" 1 counter) ;;
            evalsha) cmd=(evalsha "$(redis-cli -p "$port" script load "$script")" 1 counter) ;;
        esac
        errors=$(redis-benchmark -p "$port" -n "$requests" -P "$pipeline" -c 50 -q --csv "${cmd[@]}" 2>&1 \
            | grep -ci 'error' || true)
        [ "$errors" = 0 ] || { echo "$system $test: redis-benchmark reported errors" >&2; exit 1; }
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    pid=""
    awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

script="return redis.call('incr', KEYS[1])"
echo "instructions per request (user space, callgrind; $requests requests, -P $pipeline -c 50)" >&2
printf '%-12s %12s %12s %8s\n' test xlane-1 redis ratio
declare -A idle
for system in xlane redis; do
    echo "  $system idle ..." >&2
    idle[$system]=$(count "$system" "")
done
for t in $tests; do
    declare -A per
    for system in xlane redis; do
        echo "  $system $t ..." >&2
        total=$(count "$system" "$t")
        per[$system]=$(( (total - ${idle[$system]}) / requests ))
    done
    ratio=$(awk -v a="${per[xlane]}" -v b="${per[redis]}" 'BEGIN { printf "%.2f", a / b }')
    printf '%-12s %12s %12s %8s\n' "$t" "${per[xlane]}" "${per[redis]}" "$ratio"
done
