#!/usr/bin/env bash
# Redis 7.0.15's own test suite against xlane kv: a fresh single node per unit, then the leader
# of a fresh three-member cluster per unit (scripts/kv-leader.sh), with docs/redis-suite.skip.
# Each run's passed tests are compared with what the real redis-server passes of the same units
# with the same flags (docs/redis-suite.reference, measured with --reference); the run fails
# when a mode passes less than its floor. A unit in which no test ran at all (its server did not
# come up beside the other runner) runs once more, alone, and the output says so.
#
# Usage: scripts/redis-suite.sh [--bin XLANE] [--units "unit/type/list ..."] [--modes "single leader"]
#                               [--jobs N] [--log DIR] [--reference]
#   --jobs N      run the units in N runners at once (default 2; each unit still gets its own fresh
#                 server; most of a unit's time is the suite's own waits, not CPU); leader mode
#                 runs one at a time
#   --reference   run the same units against a fresh real redis-server per unit instead, and
#                 print the lines of docs/redis-suite.reference
# Env: REDIS_SUITE (default ../shared/tools/redis-suite), XLANE_SUITE_FLOOR_SINGLE (percent,
#      default 90), XLANE_SUITE_FLOOR_LEADER (default 85).
# Needs tclsh 8.6, redis-server, redis-cli and redis-benchmark on PATH (the suite calls them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
suite=${REDIS_SUITE:-$here/../shared/tools/redis-suite}
bin=$here/target/release/xlane
units=""
modes="single leader"
logdir=""
reference=0
jobs=2
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$(readlink -f "$2"); shift 2 ;;
        --units) units=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --log) logdir=$(readlink -f "$2"); shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --reference) reference=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $jobs in ''|*[!0-9]*|0) echo "--jobs wants a positive number, not '$jobs'" >&2; exit 2 ;; esac
[ -x "$suite" ] || { echo "Redis's suite runner not found at $suite (set REDIS_SUITE)" >&2; exit 1; }
command -v tclsh >/dev/null || { echo "tclsh is missing: apt-get install tcl" >&2; exit 1; }
# Redis's default units without scripting and functions (issue 41).
if [ -z "$units" ]; then
    units=$(awk '!/^#/ && NF { print $1 }' "$here/docs/redis-suite.reference" | tr '\n' ' ')
fi
skip=$here/docs/redis-suite.skip
work=$(mktemp -d /tmp/xlane-suite.XXXXXX)
# The single nodes' logs, in memory: the runner kills each node with SIGKILL, so a node's own
# clean-up never runs; this run's directory goes when the run ends.
shm=$(mktemp -d /dev/shm/xlane-suite.XXXXXX)
trap 'rm -rf "$work" "$shm"' EXIT

run() { # name server-cmd-or-empty → $work/name.out (the unit lines, in the order of $units)
    local name=$1 cmd=$2 args=() k pids=() shard
    [ -n "$logdir" ] && { mkdir -p "$logdir/$name"; args+=(--log "$logdir/$name"); }
    # The reference runs without the skip file: a skipped test counts as not passed.
    if [ -z "$cmd" ]; then args+=(--reference); else args+=(--server-cmd "$cmd" --skipfile "$skip"); fi
    echo "== $name: $(echo "$units" | wc -w) units, $jobs at a time"
    # Shard k takes every jobs-th unit from the k-th (the big units spread over the shards).
    for ((k = 0; k < jobs; k++)); do
        shard=$(echo "$units" | tr ' ' '\n' | awk -v j="$jobs" -v k="$k" 'NF && (n++ % j) == k' | tr '\n' ' ')
        [ -n "${shard// /}" ] || continue
        "$suite" "${args[@]}" --units "$shard" > "$work/$name.$k.out" 2>&1 &
        pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k" || true; done
    # A unit in which no test ran at all, where redis-server passes some (its server did not come
    # up in time beside the other runner, or a port it needed was taken), runs once more, alone.
    # A unit whose tests ran and failed is never run again.
    local again=""
    for u in $units; do
        if grep -qh "^$u ok=0 err=0" "$work/$name".*.out 2>/dev/null \
            && awk -v u="$u" '$1 == u && $2 > 0 { f = 1 } END { exit !f }' "$here/docs/redis-suite.reference"; then
            again="$again $u"
        fi
    done
    if [ -n "$again" ] && [ "$jobs" -gt 1 ]; then
        echo "no test ran in:$again; running them again, one at a time"
        "$suite" "${args[@]}" --units "$again" > "$work/$name.again.out" 2>&1 || true
    fi
    for u in $units; do
        { grep -h "^$u ok=" "$work/$name.again.out" 2>/dev/null \
            || grep -h "^$u ok=" "$work/$name".[0-9]*.out; } | head -1 \
            | grep . || echo "$u ok=0 err=0 stopped: no result from the runner"
    done > "$work/$name.out"
    cat "$work/$name.out"
    awk '{ split($2, a, "="); split($3, b, "="); o += a[2]; e += b[2] }
         END { printf "total ok=%d err=%d\n", o, e }' "$work/$name.out"
    grep -q ' ok=[1-9]' "$work/$name.out" || { tail -20 "$work/$name".*.out; return 1; }
}

if [ "$reference" = 1 ]; then
    run reference ""
    echo "# unit  passed-by-redis-server-7.0.15 (this file's format)"
    awk '/^unit\// { split($2, a, "="); print $1, a[2] }' "$work/reference.out"
    exit 0
fi

[ -x "$bin" ] || { echo "no xlane binary at $bin (cargo build --release -p xlane, or --bin)" >&2; exit 1; }
status=0
for mode in $modes; do
    case $mode in
        single) run single "$bin kv serve --bind 127.0.0.1:{port} --data $shm/{port}"; floor=${XLANE_SUITE_FLOOR_SINGLE:-90} ;;
        # One runner at a time: the runner picks {port} free, but not the members' other ports
        # (PORT+1, PORT+2, PORT±10000..), which a second runner's cluster may hold.
        leader) jobs=1 run leader "$here/scripts/kv-leader.sh {port} $bin"; floor=${XLANE_SUITE_FLOOR_LEADER:-85} ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
    # Passed per unit against the reference's count of the same unit (never above it).
    read -r ours theirs < <(awk -v units="$units" '
        FNR == NR { if (!/^#/ && NF) ref[$1] = $2; next }
        /^unit\// { split($2, a, "="); got[$1] = a[2] }
        END { n = split(units, u, " ")
              # A unit counts at most what redis-server passes of it.
              for (i = 1; i <= n; i++) { g = got[u[i]] + 0; r = ref[u[i]] + 0; o += (g < r ? g : r); t += r }
              printf "%d %d\n", o, t }' "$here/docs/redis-suite.reference" "$work/$mode.out")
    pct=$(awk -v o="$ours" -v t="$theirs" 'BEGIN { printf "%.1f", t ? 100 * o / t : 0 }')
    echo "$mode: $ours of the $theirs tests redis-server passes ($pct %; floor $floor %)"
    if awk -v p="$pct" -v f="$floor" 'BEGIN { exit !(p < f) }'; then
        echo "$mode: below the floor" >&2
        status=1
    fi
done
exit $status
