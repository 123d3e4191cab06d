#!/usr/bin/python3
"""file_mid_pass.py - a replica's filing and pull never wait behind the relay
worker's pass, even one that writes to that very replica (issue 37).

Before, every pass of the worker that read notes took sync.replicas whole
(an ExclusiveLock) before its snapshot and held it to its commit, so that a
filing's writes to its replica's row never failed the pass to serialize:
every filing and every pull that acknowledged waited for the pass.  Now the
pass writes no row of sync.replicas a filing writes (its chains are copied
after its commit) and holds the table in a mode filings do not conflict with.

The pass is held mid-way, deterministically: a session here locks the held
rows of replica B (FOR UPDATE) before a row both replicas hold changes, so
the worker's pass, which sends the row to A and B, waits on B's held row
with its transaction open.  Meanwhile A's own role files and pulls with
lock_timeout set: neither waits (before: 55P03).  Then the pass goes on; A
applies what it sent (the chain unbroken), and sync.replicas says where A's
chain is and what it is owed.  Last, the pass is failed to serialize (the
held row it waits on is written): the worker runs it again, and both
replicas get the row.  And the copy of a pass's chains is lost: A pulls on
regardless, and the next worker copies them before its first pass.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import sys
import time

import psycopg2

from harness import Replica, Server, check, finish

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

A = "f37f37f3-0000-4000-8000-00000000000a"
B = "f37f37f3-0000-4000-8000-00000000000b"
DB = "file_mid_pass"

srv = Server(DB)
srv.exec("""
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 10) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
CREATE ROLE mid_store_a LOGIN PASSWORD 'pw-a';
""")
srv.exec("SELECT sync.replica_add(%s, role => 'mid_store_a')", (A,))
srv.exec("SELECT sync.replica_add(%s)", (B,))


def wait(sql, args=None, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if srv.one(sql, args):
            return True
        time.sleep(0.05)
    return False


srv.exec("SELECT sync.relay_start()")
check("the worker provisions A and B",
      wait("SELECT bool_and(NOT provision AND held_due IS NULL AND last_number > 0) FROM sync.replicas"), True)
check("and has no note left", wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), True)
ra = Replica(srv, A)
ra.pull_apply()
check("A holds the ten rows", ra.one("SELECT count(*) FROM items"), 10)
ra.upload()

a = psycopg2.connect(dbname=DB, user="mid_store_a", password="pw-a", host="localhost", port=os.environ["PGPORT"])
a.autocommit = True


def file_and_pull():
    """A files (its own role) and pulls with its claim, each waiting 3 s at most for a lock"""
    out = []
    with a.cursor() as c:
        c.execute("SET lock_timeout = '3s'")
        try:
            c.execute("SELECT sync.file(%s, %s)", (A, psycopg2.Binary(wire.up(A))))
            out.append(c.fetchone()[0].get("seq") is not None)
        except psycopg2.Error as e:
            out.append(e.pgcode)
        try:
            c.execute("SELECT count(*) FROM sync.pull(%s, %s, 1048576, %s)",
                      (A, ra.status()["applied"], psycopg2.Binary(ra.applied())))
            out.append(c.fetchone()[0] >= 0)
        except psycopg2.Error as e:
            out.append(e.pgcode)
    return out


def hold_b():
    """a session holding B's held rows of items: the pass that sends them waits for it"""
    t = psycopg2.connect(dbname=DB)
    c = t.cursor()
    c.execute("SELECT count(*) FROM (SELECT FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
              " WHERE h.replica = %s AND t.name = 'items' FOR UPDATE OF h) x", (B,))
    check("B's held rows are locked", c.fetchone()[0], 10)
    return t, c


PASS_WAITS = ("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
              " AND state = 'active' AND wait_event_type = 'Lock')")


def last_and_owed(r):
    return srv.rows("SELECT r.last_number = (SELECT max(number) FROM sync.outbox o WHERE o.replica = r.id),"
                    " r.owed_messages = (SELECT count(*) FROM sync.outbox o WHERE o.replica = r.id"
                    "   AND NOT o.dropped AND o.number > coalesce(r.snapshot_end, 0))"
                    " FROM sync.replicas r WHERE r.id = %s", (r,))[0]


# 1. a pass held mid-way, its transaction open, writing to A: A files and pulls
t, tc = hold_b()
before = srv.one("SELECT last_number FROM sync.replicas WHERE id = %s", (A,))
srv.exec("UPDATE items SET name = 'changed' WHERE id = 1")
check("the worker's pass waits on B's held row", wait(PASS_WAITS), True)
whole = srv.one("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid"
                " WHERE s.backend_type = 'magic_sync relay' AND l.locktype = 'relation'"
                "   AND l.relation = 'sync.replicas'::regclass AND l.mode = 'ExclusiveLock'")
check("the pass does not hold sync.replicas whole", whole, 0)
check("A files and pulls meanwhile, waiting for no lock (before: 55P03)", file_and_pull(), [True, True])
check("the pass has not committed", srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") > 0, True)
t.rollback()
t.close()
check("the pass commits", wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), True)
check("and its chains are copied: A's last message is its outbox's newest, what it is owed counted",
      wait("SELECT last_number > %s FROM sync.replicas WHERE id = %s", (before, A)) and last_and_owed(A),
      (True, True))
results = ra.pull_apply()
check("A applies what the pass sent, chained on (no gap)",
      sorted({r["result"] for r in results} - {"filed"}), ["applied"])
check("A holds the change", ra.one("SELECT name FROM items WHERE id = 1"), "changed")
ra.upload()
check("A acknowledged it: owed nothing",
      srv.rows("SELECT acked_number = last_number, owed_messages, owed_bytes FROM sync.replicas WHERE id = %s", (A,)),
      [(True, 0, 0)])

# 2. the held row the pass waits on is written meanwhile: the pass fails to
# serialize, and the worker runs it again (holding sync.replicas whole)
mid = srv.one("SELECT last_value FROM sync.message_seq")
t, tc = hold_b()
srv.exec("UPDATE items SET name = 'changed again' WHERE id = 2")
check("the worker's next pass waits on B's held row", wait(PASS_WAITS), True)
tc.execute("UPDATE sync.held h SET replace = h.replace FROM sync.tables t"
           " WHERE t.id = h.tab AND h.replica = %s AND t.name = 'items'", (B,))
t.commit()
t.close()
check("the pass run again commits", wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), True)
check("B is sent the row", wait("SELECT EXISTS (SELECT FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                                " WHERE h.replica = %s AND t.name = 'items' AND h.number > %s)",
                                (B, mid)), True)
check("A's chain is where its outbox says", wait("SELECT r.last_number = (SELECT max(number) FROM sync.outbox o"
                                               " WHERE o.replica = r.id) FROM sync.replicas r WHERE r.id = %s",
                                               (A,)), True)
results = ra.pull_apply()
check("A applies it, chained on (no gap)", sorted({r["result"] for r in results} - {"filed"}), ["applied"])
check("A holds the second change", ra.one("SELECT name FROM items WHERE id = 2"), "changed again")
ra.upload()
check("A acknowledged it: owed nothing",
      srv.rows("SELECT acked_number = last_number, owed_messages, owed_bytes FROM sync.replicas WHERE id = %s", (A,)),
      [(True, 0, 0)])

# 3. the copy of a pass's chains is lost (the worker dies waiting to make
# it): A pulls and applies the pass's message meanwhile, and is not taken
# for a replica ahead of its record (the pull reads where its chain is from
# the outbox); the next worker copies the chains before its first pass
t = psycopg2.connect(dbname=DB)
tc = t.cursor()
tc.execute("SELECT FROM sync.replicas WHERE id = %s FOR UPDATE", (A,))
srv.exec("UPDATE items SET name = 'changed a third time' WHERE id = 3")
check("the pass commits", wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), True)
check("its chains' copy waits for A's row",
      wait("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
           " AND query = 'magic_sync outbox bounds' AND wait_event_type = 'Lock')"), True)
srv.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")
check("the worker is gone", wait("SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'magic_sync relay')"),
      True)
t.rollback()
t.close()
check("A's chain was not copied",
      srv.one("SELECT r.last_number < (SELECT max(number) FROM sync.outbox o WHERE o.replica = r.id)"
              " FROM sync.replicas r WHERE r.id = %s", (A,)), True)
results = ra.pull_apply()
check("A applies the pass's message", sorted({r["result"] for r in results} - {"filed"}), ["applied"])
check("A holds the third change", ra.one("SELECT name FROM items WHERE id = 3"), "changed a third time")
ra.pull_apply()
ra.upload()
check("A pulled after it and filed: neither took it for ahead of the record (not provisioned again)",
      srv.rows("SELECT provision, acked_number > last_number FROM sync.replicas WHERE id = %s", (A,)), [(False, True)])
srv.exec("SELECT sync.relay_start()")
check("the next worker copies the chains: A's is where it acknowledged, owed nothing",
      wait("SELECT last_number = acked_number AND last_nonce = acked_nonce AND owed_messages = 0 AND owed_bytes = 0"
           " FROM sync.replicas WHERE id = %s", (A,)), True)
srv.exec("UPDATE items SET name = 'changed a fourth time' WHERE id = 4")
check("and its next pass chains on from there",
      wait("SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)") and
      sorted({r["result"] for r in ra.pull_apply()} - {"filed"}), ["applied"])
check("A holds the fourth change", ra.one("SELECT name FROM items WHERE id = 4"), "changed a fourth time")
a.close()
finish()
