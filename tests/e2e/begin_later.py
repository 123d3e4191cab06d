#!/usr/bin/python3
"""begin_later.py - a snapshot of large tables read whole begins with a
message of its Begin alone, written last, whose count of rows is the rows
read (issue 37: counting them beforehand read each such table twice;
src/pg/relay/pack.c's ms_begin_first).

Two broadcast tables, together past MS_WHOLE_LARGE_BLOCKS (load.h), are
provisioned to a replica, then to two at once, then to the first again (a
snapshot that follows a chain).  Each snapshot's first message is its Begin
alone, the only one marked as a snapshot's start, its count every row it
carries; its messages chain one after another; the replica applies them
with no gap, begins with that count, and holds exactly its wanted set, at
the current values after writes that follow.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import sys
import tempfile

from harness import Replica, Server, check, finish, settle

ROWS = int(os.environ.get("BEGIN_LATER_ROWS", "70000"))
DB = "begin_later"
A = "b1b1b1b1-0000-4000-8000-00000000000a"
B = "b1b1b1b1-0000-4000-8000-00000000000b"
C = "b1b1b1b1-0000-4000-8000-00000000000c"

srv = Server(DB)
srv.exec("""
CREATE TABLE big (id int PRIMARY KEY, v text NOT NULL);
CREATE TABLE small (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO small SELECT g, 'small ' || g FROM generate_series(1, 25) g;
""")
srv.exec("INSERT INTO big SELECT g, repeat('x', 100) || g FROM generate_series(1, %s) g", (ROWS,))
srv.exec("SELECT sync.mirror('big', 'catalog', 'broadcast'), sync.mirror('small', 'catalog', 'broadcast')")
check("the tables read whole are large (load.h's MS_WHOLE_LARGE_BLOCKS)",
      srv.one("SELECT pg_relation_size('big') / current_setting('block_size')::int >= 1024"), True)
# the notes of the rows written, planned before any replica is
srv.relay()


def total():
    return srv.one("SELECT (SELECT count(*) FROM big) + (SELECT count(*) FROM small)")


def snapshot(replica):
    """the replica's last snapshot: its messages (number, snapshot start, inspected), in order"""
    start = srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (replica,))
    return srv.rows("SELECT o.number, o.snapshot, sync.inspect(o.head || b.bytes)"
                    " FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body"
                    " WHERE o.replica = %s AND o.number >= %s ORDER BY o.number", (replica, start))


def check_snapshot(name, replica, previous):
    msgs = snapshot(replica)
    first = msgs[0][2]
    check(f"{name}: its first message starts it, and only it", [m[1] for m in msgs],
          [True] + [False] * (len(msgs) - 1))
    check(f"{name}: its first message is its Begin alone", ("begin" in first["down"], first["down"]["tables"]),
          (True, []))
    upserts = sum(len(t.get("upserts", [])) for _, _, m in msgs for t in m.get("down", {}).get("tables", []))
    check(f"{name}: its Begin counts every row it carries", int(first["down"]["begin_rows"]), upserts)
    check(f"{name}: it carries every row", upserts, total())
    check(f"{name}: its Begin follows the chain before it", first["previous"], previous)
    check(f"{name}: each message follows the one before", [m[2]["previous"] for m in msgs[1:]],
          [m[0] for m in msgs[:-1]])
    check(f"{name}: it ends with its End", "end_snapshot" in msgs[-1][2], True)


def check_file(name, r, results=None):
    if results is not None:
        check(f"{name}: applied whole, no gap", sorted({x["result"] for x in results}), ["applied"])
        check(f"{name}: the replica begins with the count", (results[0]["snapshot"], results[0].get("begin_rows")),
              ("begin", total()))
    want = srv.wanted(r.id)
    check(f"{name}: the file holds exactly the wanted set",
          (r.keys("big", ["id"]), r.keys("small", ["id"])), (want.get("big", set()), want.get("small", set())))
    check(f"{name}: at the current values",
          r.one("SELECT group_concat(v, ',') FROM (SELECT v FROM big ORDER BY id)"),
          srv.one("SELECT string_agg(v, ',' ORDER BY id) FROM big"))


tmp = tempfile.mkdtemp()
srv.exec("SELECT sync.replica_add(%s)", (A,))
did = srv.relay()
check("one replica provisioned", did["provisioned"], 1)
check_snapshot("A's snapshot", A, 0)
a = Replica(srv, A, os.path.join(tmp, "a.db"))
check_file("A", a, a.pull_apply())

# writes after it: the next passes send them
srv.exec("UPDATE big SET v = 'changed ' || id WHERE id % 1000 = 0")
srv.exec("DELETE FROM big WHERE id % 1000 = 1")
srv.exec("INSERT INTO big VALUES (%s, 'new')", (ROWS + 1,))
settle(srv, [a])
check_file("A after writes", a)

# two provisioned at once: each its Begin, written last, the rows' bodies shared
srv.exec("SELECT sync.replica_add(%s), sync.replica_add(%s)", (B, C))
did = srv.relay()
check("two replicas provisioned", did["provisioned"], 2)
check_snapshot("B's snapshot", B, 0)
check_snapshot("C's snapshot", C, 0)
check("B and C share their rows' bodies",
      srv.one("SELECT count(DISTINCT o.body) FROM sync.outbox o WHERE o.replica IN (%s, %s) AND NOT o.snapshot",
              (B, C)),
      srv.one("SELECT count(*) FROM sync.outbox o WHERE o.replica = %s AND NOT o.snapshot", (B,)))
b = Replica(srv, B, os.path.join(tmp, "b.db"))
c = Replica(srv, C, os.path.join(tmp, "c.db"))
check_file("B", b, b.pull_apply())
check_file("C", c, c.pull_apply())

# A provisioned again: its new snapshot follows its chain, and lets go of nothing it wants
settle(srv, [a, b, c])
last = srv.one("SELECT last_number FROM sync.replicas WHERE id = %s", (A,))
srv.exec("UPDATE sync.replicas SET provision = true WHERE id = %s", (A,))
srv.exec("UPDATE big SET v = 'again ' || id WHERE id % 997 = 0")
did = srv.relay()
check("A provisioned again", did["provisioned"], 1)
check_snapshot("A's second snapshot", A, last)
check_file("A again", a, [x for x in a.pull_apply() if x["result"] != "duplicate"])
settle(srv, [a, b, c])
for name, r in (("A", a), ("B", b), ("C", c)):
    check_file(f"{name} at the end", r)
    check(f"{name}: what the server records it holds is what it holds",
          srv.held(r.id), {"big": r.keys("big", ["id"]), "small": r.keys("small", ["id"])})
finish()
