"""Python's redis client over TLS to `xlane kv serve --tls-port`, unmodified.

Usage: tls_client.py PORT CA_FILE CERT_FILE KEY_FILE PASSWORD

Writes a 3 MiB value and a pipeline of 20 000 writes then reads (a pipeline
larger than what the server reads from one connection per turn, so that
input held by TLS between turns is exercised), checks every reply, and
prints "ok".
"""
import sys

import redis

port, ca, cert, key, password = int(sys.argv[1]), *sys.argv[2:6]
r = redis.Redis(
    host="127.0.0.1",
    port=port,
    ssl=True,
    ssl_ca_certs=ca,
    ssl_certfile=cert,
    ssl_keyfile=key,
    password=password,
    socket_timeout=60,
)
assert r.ping() is True
big = bytes(range(256)) * (3 * 4096)
assert r.set("py:big", big) is True
assert r.get("py:big") == big
n = 20000
p = r.pipeline(transaction=False)
for i in range(n):
    p.set(f"py:{i}", f"value-{i}-" + "v" * 100)
assert p.execute() == [True] * n
p = r.pipeline(transaction=False)
for i in range(n):
    p.get(f"py:{i}")
got = p.execute()
want = [f"value-{i}-".encode() + b"v" * 100 for i in range(n)]
assert got == want, "pipelined reads differ"
assert r.incr("py:count") == 1
print("ok")
