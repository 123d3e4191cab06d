#!/usr/bin/python3
"""What values digests cost the server (issue 40, "Value digests").  Not a
test: prints figures.

One replica holds ROWS rows of a json table and ROWS of a proto one (first
sync through the harness).  Median CPU time of the backend filing (read from
/proc/PID/schedstat: wall time on a shared machine is its load) of:
  keys     an upload carrying both tables' digests by keys alone (a replica
           before values digests, wire.up)
  values   the replica's own upload with its digests due: keys and values,
           the server computing its values digest over its current rows
and their ratio; then, after one value drifted in the replica's file, the
filing that catches it and the relay pass that sends the table again (what
one drifted row costs until range repair narrows it).

  bench/run values.py [ROWS]
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import wire  # noqa: E402
from harness import Replica, Server, settle  # noqa: E402

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
ROUNDS = 5
S1 = "11111111-1111-4111-8111-111111111111"

srv = Server("bench_values")
srv.exec(f"""
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric, qty int, note text);
CREATE TABLE pitems (id int PRIMARY KEY, name text NOT NULL, price numeric, qty int, note text);
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.mirror('pitems', 'catalog', 'broadcast', codec => 'proto');
INSERT INTO items SELECT g, 'item ' || g, g / 100.0, g % 1000, 'note ' || g FROM generate_series(1, {ROWS}) g;
INSERT INTO pitems SELECT * FROM items;
ANALYZE items; ANALYZE pitems;
SELECT sync.replica_add('{S1}');
""")
r = Replica(srv, S1, os.path.join(tempfile.mkdtemp(), "1.db"))
settle(srv, [r])
srv.exec("VACUUM ANALYZE sync.held")
pid = srv.one("SELECT pg_backend_pid()")


def cpu_ms():
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e6


def timed(fn):
    t0 = cpu_ms()
    out = fn()
    return cpu_ms() - t0, out


def values_upload():
    r.q("UPDATE _sync_state SET digest_due = 1 WHERE id = 1")
    return r.upload()["digests"]


def keys_upload():
    d = r.digest()
    up = wire.up(S1, ack=r.applied(),
                 digests=[(t, v["count"], int(v["fnv"], 16)) for t, v in d.items()])
    return srv.file(S1, up)["digests"]


keys_ms, values_ms = [], []
for i in range(ROUNDS):
    for which, fn, out in ((0, keys_upload, keys_ms), (1, values_upload, values_ms))[::1 if i % 2 == 0 else -1]:
        ms, said = timed(fn)
        assert said == "match", said
        out.append(ms)
k, v = statistics.median(keys_ms), statistics.median(values_ms)
load = os.getloadavg()[0]
print(f"{ROWS} rows a table, 2 tables (json, proto); load {load:.1f}")
print(f"filing digests, keys only   {k:8.1f} ms CPU")
print(f"filing digests, with values {v:8.1f} ms CPU  ratio {v / k:.2f}; values alone {(v - k) / (2 * ROWS) * 1e3:.2f} us a row")

# one value drifted: caught, and the table goes again
triggers = r.q("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'items'")
for name, _ in triggers:
    r.q(f'DROP TRIGGER "{name}"')
r.q("UPDATE items SET name = 'drifted' WHERE id = 7")
for _, made in triggers:
    r.q(made)
caught_ms, said = timed(values_upload)
pass_ms, did = timed(srv.relay)
print(f"one drifted row: the filing that catches it {caught_ms:.1f} ms CPU ({said});"
      f" the pass sending the table again {pass_ms:.1f} ms CPU, {did['messages']} messages;"
      f" load {os.getloadavg()[0]:.1f}")
settle(srv, [r])
assert r.one("SELECT name FROM items WHERE id = 7") == "item 7"
