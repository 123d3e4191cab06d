#!/usr/bin/python3
"""refused_cost.py - one replica's refusals cost that replica, linear in
what it refuses and what is due, whatever the statistics say (issue 38.2).

A store is assigned N rows of a table and refuses every one (its app's
build is buggy); the statistics of sync.held and sync.refused_rows are
those from before the refusals (autovacuum off for them, as after a burst
of refusals).  The work of each step is counted, not timed: every plan node
of every statement it runs (auto_explain, ANALYZE), its rows and the rows
its filters removed, times its loops, and the pages it read.  At 2N the work must be about twice
that at N (at most 2.6 times), where a statement planned as a nested loop
over every refused row of the replica for each row takes four times:

  - filing the upload that refuses them (sync.file);
  - the relay pass that sends them all again when they are due (before:
    15,005 rows due took 18 s, 60,000 did not finish in 9 minutes);

and the rows go: the pass sends N rows, to that store alone.  An upload of
the store's that acknowledges nothing new costs the same at 2N as at N
(before, each upload looked up the held row of every row it had refused:
twice the work at 2N, an empty upload too).

The other stores pay nothing for it: after the store refused its rows, had
them sent again and refused them again three times over (every change of a
refused row's due time leaves an entry in refused_rows_due until vacuum), an
idle pass and a one-row change to every store read no more pages than
before the refusals (at most 3 more; before sync.refused_due, the probe of
the earliest due walked every entry left: an idle pass read 168 pages, then
582 at 2N).

Run by tests/e2e/run (inside pg_virtualenv)."""
import collections
import json
import os
import sys
import uuid

import psycopg2

from harness import Server, check, finish

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

N = int(os.environ.get("REFUSED_COST_N", "2000"))
STORE = "5e5e5e5e-0000-4000-8000-000000000001"
OTHERS = [f"5e5e5e5e-0000-4000-8000-{i:012d}" for i in range(2, 12)]


def work(notices):
    """what the statements logged did: the rows every plan node handled ((rows out + rows its filters
    removed) x loops), and the pages the outermost read (an index scanned far beyond its conditions
    reads many; its buffers count those of every statement it ran)"""
    def node(p):
        rows = p.get("Actual Rows", 0) + p.get("Rows Removed by Filter", 0) + \
            p.get("Rows Removed by Join Filter", 0) + p.get("Rows Removed by Index Recheck", 0)
        return rows * p.get("Actual Loops", 1) + sum(node(s) for s in p.get("Plans", []))
    rows = pages = 0
    for n in notices:
        if "plan:" in n and "{" in n:
            plan = json.loads(n[n.index("{"):])["Plan"]
            rows += node(plan)
            pages = max(pages, sum(plan.get(k, 0) for k in (
                "Shared Hit Blocks", "Shared Read Blocks", "Local Hit Blocks", "Local Read Blocks")))
    return rows, pages


def measured(srv, sql, args=None):
    """sql run with every statement it runs explained: (its work, its result)"""
    with srv.conn.cursor() as c:
        c.execute("LOAD 'auto_explain'")
        c.execute("SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;"
                  " SET auto_explain.log_buffers = on;"
                  " SET auto_explain.log_nested_statements = on; SET auto_explain.log_format = json;"
                  " SET auto_explain.log_timing = off; SET client_min_messages = log")
        srv.conn.notices.clear()
        c.execute(sql, args)
        result = c.fetchone()
        c.execute("SET client_min_messages = error; SET auto_explain.log_min_duration = -1")
        return work(srv.conn.notices), result


def run(n):
    """a fleet whose store refuses n rows: (work filing the refusals, work of the pass sending them, rows sent)"""
    srv = Server(f"refused_cost_{n}")
    srv.conn.notices = collections.deque()   # every notice kept (a list keeps the last 50)
    srv.exec("""
    CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
    INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 100) g;
    SELECT sync.mirror('products', 'catalog', 'broadcast');
    CREATE TABLE stock (id int PRIMARY KEY, store uuid NOT NULL, qty int NOT NULL);
    SELECT sync.mirror('stock', 'catalog', 'assigned(store)');
    """)
    srv.exec("INSERT INTO stock SELECT g, %s, g FROM generate_series(1, %s) g", (STORE, n))
    for r in [STORE] + OTHERS:
        srv.exec("SELECT sync.replica_add(%s)", (r,))
    srv.relay()
    srv.exec("UPDATE sync.replicas SET acked_number = last_number")
    srv.exec("DELETE FROM sync.outbox")
    # the statistics from before the refusals stay
    srv.exec("VACUUM ANALYZE sync.held, sync.refused_rows, sync.replicas")
    srv.exec("ALTER TABLE sync.held SET (autovacuum_enabled = false)")
    srv.exec("ALTER TABLE sync.refused_rows SET (autovacuum_enabled = false)")
    others_before = others(srv)
    # its build said first, so that the refusals wait their minute
    def head():
        return wire.field(1, 1) + wire.field(2, uuid.UUID(STORE).bytes) + wire.field(3, os.urandom(16))
    srv.file(STORE, wire.checked(head() + wire.field(11, wire.now_seq()) + wire.field(14, "app 1")))
    refusals = b"".join(wire.field(6, wire.field(1, "stock") + wire.field(2, wire.key([k])) + wire.field(3, "a bug"))
                        for k in range(1, n + 1))
    body = head() + refusals + wire.field(11, wire.now_seq()) + wire.field(14, "app 1")
    filing, _ = measured(srv, "SELECT sync.file(%s, %s) IS NOT NULL", (STORE, psycopg2.Binary(wire.checked(body))))
    check(f"{n}: every row refused, none due", srv.rows(
        "SELECT count(*), count(*) FILTER (WHERE due <= now()) FROM sync.refused_rows"), [(n, 0)])
    srv.exec("UPDATE sync.refused_rows SET due = now() - interval '1 second'")
    srv.exec("SET default_transaction_isolation = 'repeatable read'")
    passing, (sent,) = measured(srv, "SELECT rows_sent FROM sync.relay_pass()")
    srv.exec("RESET default_transaction_isolation")
    check(f"{n}: the pass sends them to the store alone", srv.rows(
        "SELECT id FROM sync.replicas WHERE last_number > acked_number"), [(STORE,)])
    # it refuses them again, they are sent again, three times over; then they wait
    for again in range(3):
        srv.exec("UPDATE sync.replicas SET acked_number = last_number")
        srv.exec("DELETE FROM sync.outbox")
        body = head() + refusals + wire.field(11, wire.now_seq()) + wire.field(14, "app 1")
        srv.file(STORE, wire.checked(body))
        if again < 2:
            srv.exec("UPDATE sync.refused_rows SET due = now() - interval '1 second'")
            srv.relay()
    check(f"{n}: refused again, waiting", srv.rows(
        "SELECT count(*), count(*) FILTER (WHERE due > now()) FROM sync.refused_rows"), [(n, n)])
    # an upload of its acknowledging nothing new: what it refused is not walked again
    quiet, _ = measured(srv, "SELECT sync.file(%s, %s) IS NOT NULL", (STORE, psycopg2.Binary(wire.checked(
        head() + wire.field(11, wire.now_seq()) + wire.field(14, "app 1")))))
    check(f"{n}: its counts stay", srv.one("SELECT count(*) FROM sync.refused_rows"), n)
    others_after = others(srv)
    print(f"{n}: the other stores' passes (idle, one-row change) read {others_before} pages before the refusals,"
          f" {others_after} after", flush=True)
    check(f"{n}: the other stores' passes read no more after (at most 3 pages)",
          [b - a <= 3 for a, b in zip(others_before, others_after)], [True, True])
    srv.conn.close()
    return filing, passing, sent, quiet


def others(srv):
    """the pages an idle pass and a pass sending a one-row change to every replica read"""
    srv.exec("UPDATE sync.replicas SET acked_number = last_number")
    srv.exec("DELETE FROM sync.outbox")
    srv.exec("SET default_transaction_isolation = 'repeatable read'")
    srv.exec("SELECT rows_sent FROM sync.relay_pass()")     # what is left to do, done
    (_, idle), _ = measured(srv, "SELECT rows_sent FROM sync.relay_pass()")
    srv.exec("UPDATE products SET name = name || '.' WHERE id = 1")
    (_, change), (sent,) = measured(srv, "SELECT rows_sent FROM sync.relay_pass()")
    srv.exec("RESET default_transaction_isolation")
    check("the change goes to every store", sent, 1 + len(OTHERS))
    srv.exec("UPDATE sync.replicas SET acked_number = last_number")
    srv.exec("DELETE FROM sync.outbox")
    return idle, change


f1, p1, s1, q1 = run(N)
f2, p2, s2, q2 = run(2 * N)
for what, a, b in (("filing the refusals", f1, f2), ("the pass sending them", p1, p2),
                   ("an upload acknowledging nothing new", q1, q2)):
    print(f"{what}: {a[0]} rows and {a[1]} pages of work at {N}, {b[0]} and {b[1]} at {2 * N}"
          f" ({b[0] / a[0]:.2f} and {b[1] / a[1]:.2f} times)", flush=True)
check("the pass sends every row due", (s1, s2), (N, 2 * N))
check("filing twice the refusals is about twice the work", (f2[0] / f1[0] <= 2.6, f2[1] / f1[1] <= 2.6), (True, True))
check("sending twice the rows due is about twice the work", (p2[0] / p1[0] <= 2.6, p2[1] / p1[1] <= 2.6), (True, True))
# before: every upload walked every row it refused, each one's held row looked up (twice the work at 2N)
check("an upload acknowledging nothing new costs no more for twice the rows refused",
      (q2[0] / q1[0] <= 1.3, q2[1] / q1[1] <= 1.3), (True, True))
finish()
