#!/usr/bin/python3
"""file_during_snapshot.py - a replica's filing and pull never wait for the
relay worker's snapshot of another replica (issue 37.5).

The worker provisions replica B with N rows (a long pass, once the notes
of its rows are planned).  Meanwhile
replica A's own role files an upload and pulls, each with lock_timeout set:
neither waits for a lock (before, every pass held sync.replicas whole until
it committed, and both waited for the snapshot to end: here they failed
with 55P03), and the worker holds no lock on sync.replicas as a relation
while it provisions.  Afterwards B holds its N rows and A's filing is
recorded.  The lock timeout is a bound on waiting for the snapshot, which
outlasts it: a filing that takes a lock on its own replica's row only
never comes near it.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import sys
import time

import psycopg2

from harness import Server, check, finish

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

N = int(os.environ.get("SNAPSHOT_ROWS", "400000"))
A = "a5a5a5a5-0000-4000-8000-00000000000a"
B = "a5a5a5a5-0000-4000-8000-00000000000b"
DB = "file_during_snapshot"

srv = Server(DB)
srv.exec("""
CREATE TABLE small (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO small SELECT g, 'small ' || g FROM generate_series(1, 10) g;
SELECT sync.mirror('small', 'catalog', 'broadcast');
CREATE TABLE big (id int PRIMARY KEY, store uuid NOT NULL, a text NOT NULL, b int NOT NULL);
SELECT sync.mirror('big', 'catalog', 'assigned(store)');
CREATE ROLE snap_store_a LOGIN PASSWORD 'pw-a';
""")
srv.exec("INSERT INTO big SELECT g, %s, repeat('x', 40), g FROM generate_series(1, %s) g", (B, N))
srv.exec("SELECT sync.replica_add(%s, role => 'snap_store_a')", (A,))
srv.exec("ANALYZE big")


def wait(sql, args=None, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        if srv.one(sql, args):
            return True
        time.sleep(0.05)
    return False


# the worker provisions A (ten rows), then B is added: its snapshot is the long pass
srv.exec("SELECT sync.relay_start()")
check("the worker provisions A", wait("SELECT NOT provision AND last_number > 0 FROM sync.replicas WHERE id = %s", (A,)),
      True)
# the notes of B's rows planned first (a batch of notes is a pass that holds sync.replicas whole)
check("the notes are planned", wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), True)
srv.exec("SELECT sync.replica_add(%s)", (B,))
srv.exec("SELECT sync.wake()")
in_snapshot = wait("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
                   "   AND state = 'active' AND xact_start < now() - interval '300 ms')"
                   " AND (SELECT provision FROM sync.replicas WHERE id = %s)", (B,), timeout=120)
check("the worker is in B's snapshot", in_snapshot, True)
relation_locks = srv.one("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                         " WHERE a.backend_type = 'magic_sync relay' AND l.locktype = 'relation'"
                         "   AND l.relation = 'sync.replicas'::regclass AND l.mode = 'ExclusiveLock'")
check("the worker holds no lock on sync.replicas whole while it provisions B", relation_locks, 0)

a = psycopg2.connect(dbname=DB, user="snap_store_a", password="pw-a", host="localhost", port=os.environ["PGPORT"])
a.autocommit = True
with a.cursor() as c:
    c.execute("SET lock_timeout = '3s'")
    try:
        c.execute("SELECT sync.file(%s, %s)", (A, psycopg2.Binary(wire.up(A))))
        filed = c.fetchone()[0].get("seq") is not None
    except psycopg2.Error as e:
        filed = e.pgcode
    try:
        c.execute("SELECT count(*) FROM sync.pull(%s, 0, 1048576) WHERE number IS NOT NULL", (A,))
        pulled = c.fetchone()[0] > 0
    except psycopg2.Error as e:
        pulled = e.pgcode
still = srv.one("SELECT provision FROM sync.replicas WHERE id = %s", (B,))
check("A files while B's snapshot is recorded, waiting for no lock", filed, True)
check("A pulls meanwhile", pulled, True)
check("B's snapshot was still on its way", still, True)
a.close()

check("B is provisioned", wait("SELECT NOT provision FROM sync.replicas WHERE id = %s", (B,)), True)
check("B holds its rows", srv.one("SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                                  " WHERE h.replica = %s AND t.name = 'big'", (B,)), N)
check("A's filing is recorded", srv.one("SELECT heard_at IS NOT NULL FROM sync.replicas WHERE id = %s", (A,)), True)
finish()
