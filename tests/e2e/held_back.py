#!/usr/bin/python3
"""held_back.py - one table's trouble stays its own (issue 40): a mirrored
table out of its declaration (its noting triggers disabled: sync.check()
says so) holds back only itself and the tables joined to it by foreign keys; every other
table of every replica keeps flowing, and sync.health() says what waits and
why.  Before, the relay refused every pass and sync.file every upload until
the declaration was put right.

  - issue (its triggers disabled) and comment (a record pointing at it)
    wait: the server's changes of comment are not sent, a comment a store writes waits in the
    inbox, a replica added meanwhile waits for its snapshot;
  - label (a catalog) and visits (a record) flow: the server's label goes to
    both stores, a visit one store writes is filed and reaches the other;
  - put right (its triggers enabled as sync.mirror wrote them), everything that waited goes: the changes, the
    comment filed, the new replica provisioned; each holds what it should.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import tempfile

from harness import Replica, Server, check, finish, settle

S1 = "de1d0000-1111-4111-8111-111111111111"
S2 = "de1d0000-2222-4222-8222-222222222222"
S3 = "de1d0000-3333-4333-8333-333333333333"
DB = "held_back"
tmp = tempfile.mkdtemp(prefix="held_back.")

root = Server(DB)
for n in (1, 2, 3):
    root.exec(f"DROP ROLE IF EXISTS held_{n}")
    root.exec(f"CREATE ROLE held_{n} LOGIN PASSWORD 'pw-held_{n}'")
root.exec(f"""
CREATE TABLE issue (id int PRIMARY KEY, title text NOT NULL);
CREATE TABLE comment (store uuid, id int, issue int NOT NULL REFERENCES issue, body text NOT NULL,
                      PRIMARY KEY (store, id));
CREATE INDEX ON comment (issue);
CREATE TABLE label (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
CREATE TABLE tag (store uuid, id int, name text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('issue', 'catalog', 'broadcast');
SELECT sync.mirror('comment', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('label', 'catalog', 'broadcast');
SELECT sync.mirror('visits', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('tag', 'record', 'broadcast', origin => 'store');
INSERT INTO issue VALUES (1, 'slow'), (2, 'crash');
INSERT INTO comment VALUES ('{S2}', 1, 1, 'me too');
INSERT INTO label VALUES (1, 'bug');
SELECT sync.replica_add('{S1}', role => 'held_1');
SELECT sync.replica_add('{S2}', role => 'held_2');
""")


def store(replica, n):
    srv = Server(DB, create=False, user=f"held_{n}", password=f"pw-held_{n}")
    return Replica(srv, replica, os.path.join(tmp, f"{n}.db"))


r1, r2 = store(S1, 1), store(S2, 2)
settle(root, [r1, r2])
check("provisioned", [(r.one("SELECT count(*) FROM issue"), r.one("SELECT count(*) FROM comment")) for r in (r1, r2)],
      [(2, 1), (2, 1)])

# issue is out of its declaration: its noting triggers disabled
root.exec("ALTER TABLE issue DISABLE TRIGGER USER")
# and tag's key changed: no unique index on its declared key
root.exec("ALTER TABLE tag DROP CONSTRAINT tag_pkey, ADD PRIMARY KEY (store, name)")
check("sync.check() says so", sorted({tuple(r[:2]) for r in root.rows("SELECT tab, problem FROM sync.check()")}),
      [("issue", "trigger disabled"), ("tag", "key changed")])
root.exec(f"INSERT INTO comment VALUES ('{S2}', 2, 2, 'crashes here too')")
root.exec("INSERT INTO label VALUES (2, 'perf')")
did = root.relay()
check("the relay runs, and sends", did["messages"] > 0, True)
r1.q("INSERT INTO visits VALUES (?, 1, 'opened')", (S1,))
r1.q("INSERT INTO comment VALUES (?, 5, 1, 'from store 1')", (S1,))
r1.q("INSERT INTO tag VALUES (?, 1, 'urgent')", (S1,))
filed = r1.upload()
check("store 1's upload is filed: its visit and comment filed, its tag waits",
      (filed["filed"], filed["waiting"]), (2, 1))
root.exec("SELECT sync.replica_add(%s, role => 'held_3')", (S3,))
r3 = store(S3, 3)
settle(root, [r1, r2, r3])
check("label flows to every store", [r.q("SELECT id, name FROM label ORDER BY id") for r in (r1, r2)],
      [[(1, 'bug'), (2, 'perf')]] * 2)
check("store 1's visit is filed and reaches store 2",
      (root.one("SELECT note FROM visits WHERE store = %s AND id = 1", (S1,)),
       r2.q("SELECT note FROM visits WHERE store = ? AND id = 1", (S1,))), ("opened", [("opened",)]))
check("comment waits: the server's change, and store 1's comment, are not sent",
      [r.one("SELECT count(*) FROM comment") for r in (r1, r2)], [2, 1])
check("store 1's tag waits in the inbox, unfiled, its note kept",
      (root.one("SELECT count(*) FROM sync.inbox WHERE replica = %s", (S1,)),
       root.one("SELECT count(*) FROM tag WHERE store = %s", (S1,)),
       r1.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'tag'")), (1, 0, 1))
check("the replica added meanwhile waits for its snapshot, sent nothing",
      (root.one("SELECT provision FROM sync.replicas WHERE id = %s", (S3,)), r3.provisioned(),
       root.one("SELECT count(*) FROM sync.outbox WHERE replica = %s", (S3,))), (True, False, 0))
health = root.rows("SELECT kind, reason FROM sync.health() ORDER BY kind")
check("sync.health says what waits and why",
      sorted({why.split(":")[0] for k, why in health if k == "declaration" and "held back" in why}), ["issue", "tag"])
check("and that issue's notes are parked",
      any(k == "notes parked" or "held back" in why for k, why in health if k != "declaration"), True)

# put right: everything that waited goes
root.exec("ALTER TABLE issue ENABLE ALWAYS TRIGGER magic_sync_note, ENABLE ALWAYS TRIGGER magic_sync_truncate")
root.exec("ALTER TABLE tag DROP CONSTRAINT tag_pkey, ADD PRIMARY KEY (store, id)")
root.exec("UPDATE issue SET title = 'very slow' WHERE id = 1")
check("sync.check() has nothing to say", root.rows("SELECT * FROM sync.check()"), [])
root.exec("UPDATE sync.notes SET parked_at = now() - interval '2 minutes' WHERE parked IS NOT NULL")
root.exec("UPDATE sync.inbox SET last_at = now() - interval '2 hours'")
root.one("SELECT sync.inbox_retry(100)")
settle(root, [r1, r2, r3], passes=8)
check("the server's changes of issue and comment arrive",
      [(r.one("SELECT title FROM issue WHERE id = 1"), r.one("SELECT count(*) FROM comment")) for r in (r1, r2)],
      [("very slow", 3), ("very slow", 3)])
check("store 1's tag is filed, and reaches store 2",
      (root.one("SELECT name FROM tag WHERE store = %s AND id = 1", (S1,)), r2.one("SELECT count(*) FROM tag")),
      ("urgent", 1))
check("the replica added meanwhile is provisioned", (r3.one("SELECT count(*) FROM issue"),
                                                     r3.one("SELECT count(*) FROM label")), (2, 2))
for r, s in ((r1, S1), (r2, S2), (r3, S3)):
    check(f"{s[:8]}...{s[-2:]} holds what it should", root.held(s), root.wanted(s))
check("nothing waits", root.rows("SELECT kind, reason FROM sync.health()"), [])
finish()
