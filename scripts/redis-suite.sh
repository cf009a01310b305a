#!/usr/bin/env bash
# Redis 7.0.15's own test suite against xlane kv: a fresh single node per unit, then the leader
# of a fresh three-member cluster per unit (scripts/kv-leader.sh), with docs/redis-suite.skip.
# Each run's passed tests are compared with what the real redis-server passes of the same units
# with the same flags (docs/redis-suite.reference, measured with --reference); the run fails
# when a mode passes less than its floor.
#
# Usage: scripts/redis-suite.sh [--bin XLANE] [--units "unit/type/list ..."] [--modes "single leader"]
#                               [--log DIR] [--reference]
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
while [ $# -gt 0 ]; do
    case $1 in
        --bin) bin=$(readlink -f "$2"); shift 2 ;;
        --units) units=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --log) logdir=$(readlink -f "$2"); shift 2 ;;
        --reference) reference=1; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$suite" ] || { echo "Redis's suite runner not found at $suite (set REDIS_SUITE)" >&2; exit 1; }
command -v tclsh >/dev/null || { echo "tclsh is missing: apt-get install tcl" >&2; exit 1; }
# Redis's default units without scripting and functions (issue 41).
if [ -z "$units" ]; then
    units=$(awk '!/^#/ && NF { print $1 }' "$here/docs/redis-suite.reference" | tr '\n' ' ')
fi
skip=$here/docs/redis-suite.skip
work=$(mktemp -d /tmp/xlane-suite.XXXXXX)
trap 'rm -rf "$work"' EXIT

run() { # name server-cmd-or-empty → $work/name.out
    local name=$1 cmd=$2 args=(--units "$units")
    [ -n "$logdir" ] && { mkdir -p "$logdir/$name"; args+=(--log "$logdir/$name"); }
    # The reference runs without the skip file: a skipped test counts as not passed.
    if [ -z "$cmd" ]; then args+=(--reference); else args+=(--server-cmd "$cmd" --skipfile "$skip"); fi
    echo "== $name: $(echo "$units" | wc -w) units"
    "$suite" "${args[@]}" > "$work/$name.out" 2>&1 || true
    grep -v '^{' "$work/$name.out" | grep -E '^(unit/|total)' || { tail -20 "$work/$name.out"; return 1; }
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
        single) run single "$bin kv serve --bind 127.0.0.1:{port}"; floor=${XLANE_SUITE_FLOOR_SINGLE:-90} ;;
        leader) run leader "$here/scripts/kv-leader.sh {port} $bin"; floor=${XLANE_SUITE_FLOOR_LEADER:-85} ;;
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
