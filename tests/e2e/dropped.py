#!/usr/bin/python3
"""dropped.py - one table's trouble stays its own (issue 40): DROP TABLE of a
mirrored table that others point at, CASCADE, unmirrors it cleanly in the
DDL's own transaction (docs/design.md 4.11): the tables that pointed at it
lose their foreign keys and are followed, the replicas let the dropped
table go, and every other table keeps flowing, with nothing for
sync.check() to say and no relay pass refused.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "d0d0d0d0-1111-4111-8111-111111111111"

srv = Server("dropped")
srv.exec("""
CREATE TABLE issue (id int PRIMARY KEY, title text NOT NULL);
CREATE TABLE comment (id int PRIMARY KEY, issue int NOT NULL REFERENCES issue, body text NOT NULL);
CREATE INDEX ON comment (issue);
CREATE TABLE label (id int PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('issue', 'catalog', 'broadcast');
SELECT sync.mirror('comment', 'catalog', 'broadcast');
SELECT sync.mirror('label', 'catalog', 'broadcast');
INSERT INTO issue VALUES (1, 'slow'), (2, 'crash');
INSERT INTO comment VALUES (1, 1, 'me too'), (2, 2, 'same');
INSERT INTO label VALUES (1, 'bug');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
r1 = Replica(srv, S1, os.path.join(tempfile.mkdtemp(), "s1.db"))
settle(srv, [r1])
check("provisioned", (r1.one("SELECT count(*) FROM issue"), r1.one("SELECT count(*) FROM comment")), (2, 2))

srv.exec("DROP TABLE issue CASCADE")
check("the dropped table is no longer mirrored",
      srv.one("SELECT count(*) FROM sync.tables WHERE relid::text = 'issue' OR name = 'issue'"), 0)
check("nothing for sync.check() to say", srv.rows("SELECT * FROM sync.check()"), [])
srv.exec("INSERT INTO label VALUES (2, 'perf')")
srv.exec("INSERT INTO comment VALUES (3, 99, 'points at nothing now')")
did = srv.relay()
check("the relay is not refused, and sends", did["messages"] > 0, True)
settle(srv, [r1])
check("the other tables keep flowing", (r1.one("SELECT count(*) FROM label"), r1.one("SELECT count(*) FROM comment")),
      (2, 3))
check("the replica let the dropped table go",
      r1.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'issue'"), 0)
check("it holds what it should", srv.held(S1), srv.wanted(S1))
check("nothing waits", srv.rows("SELECT kind, reason FROM sync.health()"), [])
finish()
