#!/usr/bin/python3
"""reach.py - a replica's rules decide what it reaches, never its writes
(issue 39), with real SQLite files, replica roles that are not superusers,
and magic_sync_agent for the sneakernet bundle:

  zbugs in small: projects assigned to a device, labels and issues following
  their project (an issue's label the device's to set: a two-way column),
  comments a record following its issue, reactions a record in a lane of
  their own, prefs a setting pointing at a project.  Device A holds project
  P1; project P2 (device B's) has 40 issues, their labels and B's comments.

  - in A's file, a comment on an issue of P2 is refused at once, in the
    writer's statement, naming the table, the column and the parent;
  - A's owner drops those checks from its file (it can: the file is its) and
    writes, each pointing into P2: a comment, a reaction (lane 'fast'), a
    pref, its label of an issue; beside them, a comment on its own issue.
    The server files the comment on its own issue, refuses each of the
    others, that row alone, saying table, column and key (SQLSTATE 42501),
    and A receives nothing of P2: its file, what the engine records it
    holds, and sync.wanted(A) hold no row of P2;
  - the same through a sneakernet upload bundle (export --db, then import
    --server as A's role): refused the same, nothing of P2 sent;
  - a comment written on A's issue, which the server moves to P2 while the
    upload is on its way (the taking applied before the upload goes): filed,
    for A held the issue when it wrote it; the issue comes back to A with
    its comment (a record keeps the parents it pointed at).

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import sqlite3
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
A = "3939aaaa-0000-4000-8000-00000000000a"
B = "3939bbbb-0000-4000-8000-00000000000b"
DB = "reach"
tmp = tempfile.mkdtemp(prefix="reach.")

root = Server(DB)
for role in ("reach_a", "reach_b"):
    root.exec(f"DROP ROLE IF EXISTS {role}")
    root.exec(f"CREATE ROLE {role} LOGIN PASSWORD 'pw-{role}'")
root.exec(f"""
CREATE TABLE project (id text PRIMARY KEY, owner uuid NOT NULL, name text NOT NULL);
CREATE TABLE label (id int PRIMARY KEY, "projectID" text NOT NULL REFERENCES project, name text NOT NULL);
CREATE INDEX ON label ("projectID");
CREATE TABLE issue (id text PRIMARY KEY, "projectID" text NOT NULL REFERENCES project, title text NOT NULL,
                    "labelID" int REFERENCES label);
CREATE INDEX ON issue ("projectID");
CREATE INDEX ON issue ("labelID");
CREATE TABLE comment ("deviceID" uuid, id int, "issueID" text NOT NULL REFERENCES issue, body text NOT NULL,
                      PRIMARY KEY ("deviceID", id));
CREATE INDEX ON comment ("issueID");
CREATE TABLE reaction ("deviceID" uuid, id int, "issueID" text NOT NULL REFERENCES issue, emoji text NOT NULL,
                       PRIMARY KEY ("deviceID", id));
CREATE INDEX ON reaction ("issueID");
CREATE TABLE pref ("deviceID" uuid PRIMARY KEY, "projectID" text REFERENCES project);
CREATE INDEX ON pref ("projectID");
INSERT INTO project VALUES ('P1', '{A}', 'replicache'), ('P2', '{B}', 'reflect');
INSERT INTO label VALUES (1, 'P1', 'bug'), (2, 'P2', 'secret');
INSERT INTO issue VALUES ('a1', 'P1', 'one', 1), ('a2', 'P1', 'two', NULL);
INSERT INTO issue SELECT 'b' || g, 'P2', 'hidden ' || g, 2 FROM generate_series(1, 40) g;
INSERT INTO comment SELECT '{B}', g, 'b' || (1 + g % 40), 'b says ' || g FROM generate_series(1, 20) g;
SELECT sync.mirror('project', 'catalog', 'assigned(owner)');
SELECT sync.mirror('label', 'catalog', 'follows("projectID")');
SELECT sync.mirror('issue', 'catalog', 'follows("projectID")', replica_owned => '{{labelID}}');
SELECT sync.mirror('comment', 'record', 'follows("issueID")', origin => 'deviceID');
SELECT sync.mirror('reaction', 'record', 'follows("issueID")', origin => 'deviceID', lane => 'fast');
SELECT sync.mirror('pref', 'setting', 'assigned("deviceID")', origin => 'deviceID');
SELECT sync.replica_add('{A}', role => 'reach_a');
SELECT sync.replica_add('{B}', role => 'reach_b');
""")
P2 = {"project": {"P2"}, "label": {"2"}, "issue": {f"b{g}" for g in range(1, 41)}}
root.relay()
# A's connection is its own role's, as its agent's is
srv_a = Server(DB, create=False, user="reach_a", password="pw-reach_a")
path = os.path.join(tmp, "a.db")
a = Replica(srv_a, A, path)
a.sync()


def foreign(where):
    """how many rows of project P2 `where` holds: {table: keys}"""
    return sum(len(P2[t] & where.get(t, set())) for t in P2)


def in_file():
    return {"project": {r[0] for r in a.q("SELECT id FROM project")},
            "label": {str(r[0]) for r in a.q("SELECT id FROM label")},
            "issue": {r[0] for r in a.q("SELECT id FROM issue")}}


def settle():
    for _ in range(3):
        root.relay()
        a.sync()


def nothing_of_p2(what):
    settle()
    # one-column keys, as sync.key writes them: "<length>:<value>"
    wanted = {t: {k.split(":", 1)[1] for k in keys} for t, keys in root.wanted(A).items()}
    held = {t: {k.split(":", 1)[1] for k in keys} for t, keys in root.held(A).items()}
    check(f"{what}: A's file holds no row of P2", foreign(in_file()), 0)
    check(f"{what}: nor does the engine record it holding one", foreign(held), 0)
    check(f"{what}: nor does A's rule want one", foreign(wanted), 0)


check("A holds its project, its two issues and label", (sorted(in_file()["issue"]), sorted(in_file()["project"])),
      (["a1", "a2"], ["P1"]))

# ---- the replica refuses at once -----------------------------------------------
try:
    a.q("INSERT INTO comment VALUES (?, 1, 'b1', 'let me in')", (A,))
    said = None
except sqlite3.Error as e:
    said = str(e)
check("a comment on an issue of P2 is refused in the writer's statement, naming table, column and parent",
      said is not None and all(w in said for w in ("comment", "issueID", "issue", "does not hold")), True)
check("nothing of it is written or noted", (a.one("SELECT count(*) FROM comment"),
                                            a.one("SELECT count(*) FROM _sync_notes")), (0, 0))
check("with SQLite's foreign keys as the host left them (off)", a.one("PRAGMA foreign_keys"), 0)

# ---- the owner of the file takes the checks out ----------------------------------


def untrigger():
    for (name,) in a.q("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name GLOB '_sync_fk_*'"):
        a.q(f'DROP TRIGGER "{name}"')


untrigger()
a.q("INSERT INTO comment VALUES (?, 1, 'b1', 'let me in')", (A,))
a.q("INSERT INTO comment VALUES (?, 2, 'a1', 'on my own issue')", (A,))
a.q("INSERT INTO reaction VALUES (?, 1, 'b2', '+1')", (A,))
a.q("INSERT INTO pref VALUES (?, 'P2')", (A,))
a.q("UPDATE issue SET \"labelID\" = 2 WHERE id = 'a2'")
filed = a.upload()
fast = a.one("SELECT sync_upload('fast')")
filed_fast = srv_a.file(A, bytes(fast)) if fast is not None else None
check("the server files the comment on A's own issue",
      root.rows("SELECT id, \"issueID\" FROM comment WHERE \"deviceID\" = %s", (A,)), [(2, "a1")])
check("and nothing that points into P2: no comment, reaction, pref, label",
      (root.one("SELECT count(*) FROM reaction"), root.one("SELECT count(*) FROM pref"),
       root.one("SELECT \"labelID\" FROM issue WHERE id = 'a2'")), (0, 0, None))
a.pull_apply()
reasons = dict(((t, k), r) for t, k, r in a.q("SELECT tbl, key, set_aside FROM _sync_notes WHERE set_aside IS NOT NULL"))
check("A is told of each refused row, the rest filed", sorted(t for t, _ in reasons),
      ["comment", "issue", "pref", "reaction"])
why = [r for (t, _), r in reasons.items() if t == "comment"]
check("the comment's reason names the table, the column, the key and SQLSTATE 42501",
      bool(why) and all(w in why[0] for w in ('"comment"', '"issueID"', '"issue"', "'b1'", "42501")), True)
why = [r for (t, _), r in reasons.items() if t == "issue"]
check("the label's names the two-way column and the label",
      bool(why) and all(w in why[0] for w in ('"labelID"', '"label"', "'2'")), True)
why = [r for (t, _), r in reasons.items() if t == "pref"]
check("the pref's names the setting's column and the project",
      bool(why) and all(w in why[0] for w in ('"pref"', '"projectID"', "'P2'")), True)
why = [r for (t, _), r in reasons.items() if t == "reaction"]
check("the reaction, in lane 'fast', is refused the same way",
      (filed_fast is not None, bool(why) and all(w in why[0] for w in ('"reaction"', "'b2'", "42501"))), (True, True))
nothing_of_p2("after the writes into P2")
check("A's own comment came back to it, with its issue", a.one("SELECT body FROM comment WHERE id = 2"),
      "on my own issue")

# ---- the same in a sneakernet upload bundle ------------------------------------------
untrigger()
a.q("INSERT INTO comment VALUES (?, 3, 'b3', 'by van')", (A,))
a.close()
bundle = os.path.join(tmp, "up.bundle")
conn = f"host=localhost port={os.environ['PGPORT']} dbname={DB} user=reach_a"
env = dict(os.environ, PGPASSWORD="pw-reach_a")
p = subprocess.run([AGENT, "export", "--db", path, "--replica", A, "--to", bundle, "--json"],
                   capture_output=True, text=True, timeout=120, env=env)
check("export --db writes the upload bundle", p.returncode, 0)
p = subprocess.run([AGENT, "import", "--server", conn, "--from", bundle, "--replica", A, "--json"],
                   capture_output=True, text=True, timeout=120, env=env)
check("import --server files it as A's role", p.returncode, 0)
if p.returncode != 0:
    print(p.stdout + p.stderr)
check("the comment by van is not filed", root.one("SELECT count(*) FROM comment WHERE id = 3 AND \"deviceID\" = %s",
                                                  (A,)), 0)
a.open()
nothing_of_p2("after the bundle")
check("A is told why", a.one("SELECT set_aside LIKE '%''b3''%42501%' FROM _sync_notes WHERE tbl = 'comment'"
                             " AND key = sync_key(?, 3)", (A,)), 1)

# ---- a parent taken back while the upload is on its way ------------------------------
a.q("INSERT INTO comment VALUES (?, 4, 'a1', 'written while A held a1')", (A,))
root.exec("UPDATE issue SET \"projectID\" = 'P2', \"labelID\" = 2 WHERE id = 'a1'")
root.relay()
a.pull_apply()
check("the move took a1 back: A keeps it retired for its comment",
      (a.one("SELECT count(*) FROM issue WHERE id = 'a1'"),
       a.one("SELECT count(*) FROM comment WHERE id = 4 AND \"deviceID\" = ?", (A,))), (1, 1))
check("and the message made A's checks again",
      a.one("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name GLOB '_sync_fk_*'") > 0, True)
a.upload()
check("the comment is filed: A held a1 when it wrote it",
      root.one("SELECT \"issueID\" FROM comment WHERE id = 4 AND \"deviceID\" = %s", (A,)), "a1")
settle()
check("its note is let go of", a.one("SELECT count(*) FROM _sync_notes WHERE tbl = 'comment' AND key = sync_key(?, 4)",
                                    (A,)), 0)
# what a1 brings with it (its project, and what follows that) is the planner's: counted here, not judged
print(f"a1's family, sent to A after its in-flight comment was filed: {foreign(in_file())} rows of P2")
check("a1 is A's again, its comment's parent", "a1" in in_file()["issue"], True)
check("and A's written rows keep nothing of their own: the engine forgot what it let go of",
      root.one("SELECT count(*) FROM sync.let_go WHERE replica = %s", (A,)), 0)
a.close()
finish()
