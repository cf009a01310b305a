#!/usr/bin/env bash
# Install what the tests need on a fresh Debian machine, then run every check.
# Usage: bash scripts/test.sh            (as root: the testbed tests create network namespaces)
# Env:   XLANE_FUZZ_SECONDS=N  seconds per fuzz target, unoptimised build (default 3, to keep the whole
#                              run under 35 min on 2 cores; 0 skips fuzzing; for depth, run
#                              `cargo fuzz run TARGET` in fuzz/ as its Cargo.toml says)
#        XLANE_SUITE_MODES="single leader"  Redis's suite against xlane kv in these modes (default single)
set -euo pipefail
cd "$(dirname "$0")/.."
# A one-off build gains nothing from incremental state but its disk space.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

started=$SECONDS
step() { printf '\n==> %s (at %dm%02ds)\n' "$*" $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)); }

step "system packages"
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v tc >/dev/null || need+=(iproute2)
command -v cc >/dev/null || need+=(build-essential)
command -v sockperf >/dev/null || need+=(sockperf)   # the cross-check of xlane lancet
{ command -v redis-cli && command -v redis-server; } >/dev/null || need+=(redis-tools redis-server)   # xlane kv against the real Redis tools
/usr/bin/python3 -c "import redis" 2>/dev/null || need+=(python3-redis)   # xlane kv with Python's redis package, unmodified
{ command -v etcd && command -v etcdctl; } >/dev/null || need+=(etcd-server etcd-client)   # xlane bench kv against real etcd
command -v iptables-legacy >/dev/null || need+=(iptables)   # xlane run: marking static/Go binaries by port (netfilter DSCP)
command -v tclsh >/dev/null || need+=(tcl)   # Redis's own test suite against xlane kv (scripts/redis-suite.sh)
command -v openssl >/dev/null || need+=(openssl)   # certificates for the TLS port's test (kv_single)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || need+=(faketime)   # kv_faults steps a member's wall clock (libfaketime)
if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then echo "missing ${need[*]} and not root: install them first" >&2; exit 1; fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
echo "ok"

step "rust components"
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo --version

step "disk space"
# A clean build, the tests and the fuzz targets write about 5.5 GB under
# target/; a disk that fills mid-link kills the linker with SIGBUS.
need_kb=$((6 * 1024 * 1024))
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt "$need_kb" ]; then
    echo "only $((free_kb / 1024)) MB free on the disk holding $(pwd); the build needs about 6 GB: free some space first" >&2
    exit 1
fi
echo "$((free_kb / 1024 / 1024)) GB free"

step "leftover testbeds from crashed runs"
# The test profile: cargo test below reuses these artifacts instead of building everything twice.
cargo build -q --profile test -p xlane -p xlaned -p xlane-preload   # the preload tests load the cdylib, which cargo test does not rebuild; xlane's tests run xlaned from beside xlane
./target/debug/xlane testbed down --all || true

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy -q --workspace --all-targets -- -D warnings

step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --workspace

step "tests"
cargo test --workspace --no-fail-fast 2>&1 | tee target/test.log
# cargo test exits non-zero on failure (pipefail); summarise the counts.
counts=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } } END { printf "%d %d", p, f }' target/test.log)
passed=${counts% *}; failed=${counts#* }

step "Redis's own test suite against xlane kv"
# Redis 7.0.15's suite (../shared/redis-7.0.15-tests with ../shared/tools/redis-suite, read-only:
# the runner copies it) against a fresh single node per unit, two units at a time, on the build the
# tests just made; the run fails below its floor (docs/kv-commands.md#rediss-own-test-suite).
if [ -x ../shared/tools/redis-suite ]; then
    bash scripts/redis-suite.sh --bin target/debug/xlane --modes "${XLANE_SUITE_MODES:-single}"
else
    echo "../shared/tools/redis-suite not found: skipped (it ships beside the checkout in CI)"
fi

fuzz_secs="${XLANE_FUZZ_SECONDS:-3}"
if [ "$fuzz_secs" -gt 0 ]; then
    step "fuzz (${fuzz_secs}s per target)"
    command -v cargo-fuzz >/dev/null || cargo install -q cargo-fuzz --locked
    # Every target in one build (linked side by side), not one build per run. An unoptimised
    # build (--dev, with overflow checks): 2.8 min against 5.8 for an optimised one on 2 cores,
    # which kept CI past 35 min; each target then runs 10-50x fewer inputs in its seconds.
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --dev 2>&1 | tail -3)
    for t in $(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list); do
        # Seeds (committed, e.g. a valid topology) join the working corpus.
        corpora=()
        if [ -d "fuzz/seeds/$t" ]; then mkdir -p "fuzz/corpus/$t"; corpora=("corpus/$t" "seeds/$t"); fi
        (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --dev "$t" "${corpora[@]}" -- -max_total_time="$fuzz_secs" -rss_limit_mb=2048 2>&1 | tail -3)
    done
fi

step "summary"
echo "tests: ${passed} passed, ${failed} failed; $(((SECONDS - started) / 60)) min in all"
