#!/usr/bin/python3
"""held_back.py - one table's trouble stays its own (issue 40): a mirrored
table out of its declaration (its noting triggers disabled: sync.check()
says so) holds back only itself and the tables joined to it by foreign keys; every other
table of every replica keeps flowing, and sync.health() says what waits and
why.  Before, the relay refused every pass and sync.file every upload until
the declaration was put right.

  - issue (its triggers disabled) and comment (a record pointing at it)
    wait: the server's changes of comment are not sent, a comment a store writes waits in the
    inbox; a replica added meanwhile is provisioned with the other tables
    (before, it waited), and again, with them, once they flow; so is one
    provisioned again meanwhile;
  - label (a catalog) and visits (a record) flow: the server's label goes to
    both stores, and so does a column added to label (a schema change: before,
    every schema change waited), a visit one store writes is filed and reaches the other;
  - votes (a record) has its noting triggers disabled too: a vote a store
    writes waits in the inbox (before, it was filed with no note and never
    reached another store), and so does a comment (joined to issue);
  - put right (its triggers enabled as sync.mirror wrote them), everything that waited goes: the changes, the
    comment and the vote filed, the new replica provisioned; each holds what it should.
  - a foreign key cycle made after the tables were declared (ALTER TABLE ADD
    FOREIGN KEY) holds back the tables on it, as a group, and those joined
    to them; the relay runs for every other table (before, it stopped), and
    sync.check() names each; the cycle broken, they flow again.

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
CREATE TABLE votes (store uuid, id int, up boolean NOT NULL, PRIMARY KEY (store, id));
CREATE TABLE shelf (id int PRIMARY KEY, box int);
CREATE TABLE box (id int PRIMARY KEY, shelf int REFERENCES shelf);
CREATE INDEX ON box (shelf);
CREATE TABLE item (id int PRIMARY KEY, box int REFERENCES box);
CREATE INDEX ON item (box);
SELECT sync.mirror('issue', 'catalog', 'broadcast');
SELECT sync.mirror('comment', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('label', 'catalog', 'broadcast');
SELECT sync.mirror('visits', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('tag', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('votes', 'record', 'broadcast', origin => 'store');
SELECT sync.mirror('shelf', 'catalog', 'broadcast');
SELECT sync.mirror('box', 'catalog', 'broadcast');
SELECT sync.mirror('item', 'catalog', 'broadcast');
INSERT INTO shelf VALUES (1, NULL);
INSERT INTO box VALUES (1, 1);
INSERT INTO item VALUES (1, 1);
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
# and votes' noting triggers are disabled: what a store files there would never be noted
root.exec("ALTER TABLE votes DISABLE TRIGGER USER")
check("sync.check() says so", sorted({tuple(r[:2]) for r in root.rows("SELECT tab, problem FROM sync.check()")}),
      [("issue", "trigger disabled"), ("tag", "key changed"), ("votes", "trigger disabled")])
root.exec(f"INSERT INTO comment VALUES ('{S2}', 2, 2, 'crashes here too')")
root.exec("INSERT INTO label VALUES (2, 'perf')")
# a schema change of a table that flows goes while issue is held back
root.exec("ALTER TABLE label ADD COLUMN color text NOT NULL DEFAULT 'red'")
did = root.relay()
check("the relay runs, and sends", did["messages"] > 0, True)
r1.q("INSERT INTO visits VALUES (?, 1, 'opened')", (S1,))
r1.q("INSERT INTO comment VALUES (?, 5, 1, 'from store 1')", (S1,))
r1.q("INSERT INTO tag VALUES (?, 1, 'urgent')", (S1,))
r1.q("INSERT INTO votes VALUES (?, 1, 1)", (S1,))
filed = r1.upload()
check("store 1's upload is filed: its visit filed, its comment, tag and vote wait",
      (filed["filed"], filed["waiting"]), (1, 3))
check("its vote is not written where no note would send it", root.one("SELECT count(*) FROM votes"), 0)
root.exec("SELECT sync.replica_add(%s, role => 'held_3')", (S3,))
r3 = store(S3, 3)
settle(root, [r1, r2, r3])
check("label flows to every store", [r.q("SELECT id, name FROM label ORDER BY id") for r in (r1, r2)],
      [[(1, 'bug'), (2, 'perf')]] * 2)
check("label's new column reaches both stores, with its values",
      [r.q("SELECT id, color FROM label ORDER BY id") if "color" in [c[1] for c in r.q("PRAGMA table_info(label)")]
       else None for r in (r1, r2)], [[(1, 'red'), (2, 'red')]] * 2)
check("the tables held back stay in their files, not let go of",
      [(r.one("SELECT count(*) FROM issue"), r.one("SELECT count(*) FROM votes")) for r in (r1, r2)], [(2, 1), (2, 0)])
check("store 1's visit is filed and reaches store 2",
      (root.one("SELECT note FROM visits WHERE store = %s AND id = 1", (S1,)),
       r2.q("SELECT note FROM visits WHERE store = ? AND id = 1", (S1,))), ("opened", [("opened",)]))
check("comment waits: the server's change, and store 1's comment, are not sent",
      [r.one("SELECT count(*) FROM comment") for r in (r1, r2)], [2, 1])
check("store 1's tag waits in the inbox, unfiled, its note kept",
      (root.one("SELECT count(*) FROM sync.inbox WHERE replica = %s", (S1,)),
       root.one("SELECT count(*) FROM tag WHERE store = %s", (S1,)),
       r1.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'tag'")), (3, 0, 1))
check("the replica added meanwhile is provisioned with the tables that flow (before, it waited)",
      (root.one("SELECT provision FROM sync.replicas WHERE id = %s", (S3,)), r3.provisioned(),
       r3.q("SELECT id, name FROM label ORDER BY id") if r3.provisioned() else None),
      (False, True, [(1, 'bug'), (2, 'perf')]))
check("the tables held back left out of its file",
      sorted(n for (n,) in r3.q("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN"
                                " ('issue', 'comment', 'tag', 'votes', 'label', 'visits')")), ["label", "visits"])
health = root.rows("SELECT kind, reason FROM sync.health() ORDER BY kind")
check("sync.health says what waits and why",
      sorted({why.split(":")[0] for k, why in health if k == "declaration" and "held back" in why}),
      ["issue", "tag", "votes"])
check("and that issue's notes are parked",
      any(k == "notes parked" or "held back" in why for k, why in health if k != "declaration"), True)

# store 2 provisioned again while issue is held back: with the tables that flow
root.exec("SELECT sync.replica_reprovision(%s)", (S2,))
settle(root, [r1, r2, r3])
check("store 2, provisioned again meanwhile, has the tables that flow",
      (root.one("SELECT provision FROM sync.replicas WHERE id = %s", (S2,)), r2.q("SELECT id, color FROM label ORDER BY id"),
       r2.one("SELECT count(*) FROM visits")), (False, [(1, 'red'), (2, 'red')], 1))

# put right: everything that waited goes
root.exec("ALTER TABLE issue ENABLE ALWAYS TRIGGER magic_sync_note, ENABLE ALWAYS TRIGGER magic_sync_truncate")
root.exec("ALTER TABLE tag DROP CONSTRAINT tag_pkey, ADD PRIMARY KEY (store, id)")
root.exec("SELECT sync.retrigger('votes')")
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
check("store 1's vote is filed, and reaches store 2",
      (root.one("SELECT up FROM votes WHERE store = %s AND id = 1", (S1,)), r2.one("SELECT count(*) FROM votes")),
      (True, 1))
check("store 2, provisioned again with the tables that flow again, says why",
      "held back at its snapshot flows again" in (root.one("SELECT last_error FROM sync.replicas WHERE id = %s", (S2,)) or ""),
      True)
check("the replica added meanwhile is provisioned", (r3.one("SELECT count(*) FROM issue"),
                                                     r3.one("SELECT count(*) FROM label")), (2, 2))
for r, s in ((r1, S1), (r2, S2), (r3, S3)):
    check(f"{s[:8]}...{s[-2:]} holds what it should", root.held(s), root.wanted(s))
check("nothing waits", root.rows("SELECT kind, reason FROM sync.health()"), [])

# ---- a foreign key cycle, made after the tables were declared --------------------------
root.exec("CREATE INDEX ON shelf (box)")
root.exec("ALTER TABLE shelf ADD CONSTRAINT shelf_box_fkey FOREIGN KEY (box) REFERENCES box")
check("sync.check() names each table on the cycle",
      sorted((t, p) for t, p, _ in root.rows("SELECT * FROM sync.check()")),
      [("box", "foreign key cycle"), ("shelf", "foreign key cycle")])
root.exec("INSERT INTO label VALUES (3, 'ux')")
root.exec("INSERT INTO item VALUES (2, 1)")
try:
    settle(root, [r1, r2, r3])
    ran = None
except Exception as e:   # the relay refused to run
    ran = str(e).splitlines()[0]
check("the relay runs", ran, None)
check("label flows to every store, while the cycle waits",
      [r.one("SELECT count(*) FROM label") for r in (r1, r2, r3)], [3, 3, 3])
check("the tables of the cycle, and item joined to them, are held back: item's row is not sent",
      [r.one("SELECT count(*) FROM item") for r in (r1, r2, r3)], [1, 1, 1])
check("sync.health says why box and shelf wait (and those joined to them)",
      sorted({why.split(":")[0] for k, why in root.rows("SELECT kind, reason FROM sync.health()")
              if k == "declaration" and "held back" in why}), ["box", "shelf"])
root.exec("ALTER TABLE shelf DROP CONSTRAINT shelf_box_fkey")
root.exec("UPDATE sync.notes SET parked_at = now() - interval '2 minutes' WHERE parked IS NOT NULL")
settle(root, [r1, r2, r3], passes=8)
check("the cycle broken, item's row goes", [r.one("SELECT count(*) FROM item") for r in (r1, r2, r3)], [2, 2, 2])
for r, s in ((r1, S1), (r2, S2), (r3, S3)):
    check(f"{s[:8]}...{s[-2:]} holds what it should", root.held(s), root.wanted(s))
finish()
