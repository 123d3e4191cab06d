#!/usr/bin/python3
"""What a caught-up sync.pull costs its backend's CPU, each in a transaction of its
own (issue 37; locks11: what a probe's locks held to the transaction's end cost).
Not a test: prints figures.

A table of 100 rows broadcast to one replica, provisioned by two passes by hand;
then, in one backend, a procedure pulls after the replica's last message (nothing
to return: the replica's row, its answers and its outbox read by probes) and
commits, N times, seven rounds; the backend's time on a CPU (/proc/<pid>/schedstat)
a pull, sorted, and the median.  Wall-clock noise aside, a round moves by ~5 %
on a loaded machine: compare builds alternated, several runs each.

  scripts/isolated bench/caughtup.py [N]      (default 20,000)

It starts its own throw-away cluster (scripts/lib.sh), as bench/run does.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000

if not os.environ.get("MS_BENCH_INSIDE"):
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"',
         os.path.abspath(__file__)] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

REPLICA = "dddddddd-0000-0000-0000-000000000001"
c = psycopg2.connect(dbname="postgres")
c.autocommit = True
c.cursor().execute("CREATE DATABASE caughtup")
c = psycopg2.connect(dbname="caughtup")
c.autocommit = True
cur = c.cursor()
cur.execute("CREATE EXTENSION magic_sync CASCADE")
cur.execute("SET default_transaction_isolation = 'repeatable read'")
cur.execute("CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)")
cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
cur.execute("INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 100) g")
cur.execute("SELECT sync.replica_add(%s)", (REPLICA,))
cur.execute("SELECT count(*) FROM sync.relay_pass()")
cur.execute("SELECT count(*) FROM sync.relay_pass()")
cur.execute("SELECT max(number) FROM sync.outbox WHERE replica = %s", (REPLICA,))
last = cur.fetchone()[0]
cur.execute("RESET default_transaction_isolation")
cur.execute("CREATE PROCEDURE pulls(n int, r uuid, a bigint) LANGUAGE plpgsql AS $$"
            " BEGIN FOR i IN 1..n LOOP PERFORM count(*) FROM sync.pull(r, a, 1048576); COMMIT; END LOOP; END $$")
cur.execute("CALL pulls(200, %s, %s)", (REPLICA, last))
cur.execute("SELECT pg_backend_pid()")
pid = cur.fetchone()[0]


def on_cpu():
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


rounds = []
for _ in range(7):
    before = on_cpu()
    cur.execute("CALL pulls(%s, %s, %s)", (N, REPLICA, last))
    rounds.append((on_cpu() - before) / N / 1000)
rounds.sort()
with open("/proc/loadavg") as f:
    load = " ".join(f.read().split()[:3])
print(f"{N} caught-up pulls x 7, each in its own transaction: backend CPU us a pull "
      + " ".join(f"{x:.2f}" for x in rounds) + f"; median {rounds[3]:.2f}  (load {load})")
