"""A job loop on redis-py's Lock, unmodified, against an xlane kv group.

Usage: lock_jobs.py JOBS WORKERS HOST:PORT [HOST:PORT ...]

WORKERS threads, each with its own connection, claim jobs 0..JOBS-1 one at a
time: under the lock (redis-py's `Lock`: SET NX PX to take it, its Lua
scripts to extend, reacquire and release it) a worker reads the counter
`next`, then runs the job as one transaction (`SET next n+1`, `RPUSH done n`).
Without the lock two workers would read the same `n` and run a job twice.

A worker follows the group: on `MOVED` it goes where it is told, on a refused
or cut connection or `TRYAGAIN` it tries the next member. A job whose
transaction met a failure has an unknown outcome: the worker gives the lock
back (its release script checks the token) and reads `next` again, so a job
runs at most once whatever the outcome was. Prints `progress N` as jobs
complete and `done` at the end; the test checks `done` against `next`.
"""
import re
import sys
import threading
import time

import redis
from redis.exceptions import ConnectionError, LockError, RedisError, TimeoutError

JOBS = int(sys.argv[1])
WORKERS = int(sys.argv[2])
MEMBERS = sys.argv[3:]
DEADLINE = time.monotonic() + 120
printed = threading.Lock()
failovers = [0]
errors = {}
failed = []


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=2, socket_connect_timeout=1)


def say(line):
    with printed:
        print(line, flush=True)


def worker(k):
    at = k % len(MEMBERS)
    r = connect(MEMBERS[at])
    jobs = 0
    while time.monotonic() < DEADLINE:
        lock = r.lock("jobs:lock", timeout=5, sleep=0.005, blocking_timeout=10)
        try:
            if not lock.acquire():
                continue
            try:
                n = int(r.get("next") or 0)
                if n >= JOBS:
                    return
                if n % 3 == 0:
                    lock.extend(5)
                elif n % 3 == 1:
                    lock.reacquire()
                p = r.pipeline(transaction=True)
                p.set("next", n + 1)
                p.rpush("done", n)
                p.execute()
                jobs += 1
                say("progress %d" % (n + 1))
            finally:
                lock.release()
        except (RedisError, LockError, OSError) as e:
            # Where the group leads now: the member a MOVED names, else the next one.
            # (A refused connection names its own address: only a reply is followed.)
            cut = isinstance(e, (ConnectionError, TimeoutError, OSError))
            m = None if cut else re.search(r"(\d+\.\d+\.\d+\.\d+:\d+)", str(e))
            if m and m.group(1) in MEMBERS:
                at = MEMBERS.index(m.group(1))
            else:
                at = (at + 1) % len(MEMBERS)
                time.sleep(0.05)
            with printed:
                failovers[0] += 1
                kind = "%s: %s" % (type(e).__name__, e)
                errors[kind] = errors.get(kind, 0) + 1
            r = connect(MEMBERS[at])
            # The lock this worker may still hold (its release script checks the token).
            token = lock.local.token
            if token:
                try:
                    r.lock("jobs:lock").do_release(token)
                except (RedisError, LockError, OSError):
                    pass
    failed.append("worker %d: past the deadline after %d jobs" % (k, jobs))


threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for kind, n in sorted(errors.items(), key=lambda e: -e[1])[:5]:
    print("%6d  %s" % (n, kind), file=sys.stderr)
if failed:
    raise SystemExit("; ".join(failed))
say("done failovers=%d" % failovers[0])
