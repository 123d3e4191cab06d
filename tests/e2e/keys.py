#!/usr/bin/python3
"""keys.py - keys of many types and collations, and foreign keys to unique
constraints, end to end (issue 37): a seeded random walk of one-row writes
over a schema nobody here chose, two replicas applying every message into
SQLite; after every step each replica's file and what the engine records it
holds equal sync.wanted(replica), and no replica holds a row without the
rows it points at.

  - projects assigned to a replica, varchar keys under the database's
    collation; issues follow their project, comments their issue (moving
    between issues, and issues between projects, their families with them);
  - labels keyed by text under an ICU collation, referenced with their
    project (a foreign key to a unique constraint including the key, one
    column of it an enum);
  - accounts referenced by a citext email, with ON UPDATE CASCADE (a foreign
    key to a unique index that is not the key, which logins follow);
  - slots keyed by a domain, a smallint and a uuid, items following them.

    tests/e2e/run keys.py          (SEED=n STEPS=n to vary)
"""
import os
import random

from harness import Replica, Server, check, finish, settle

SEED = int(os.environ.get("SEED", "37"))
STEPS = int(os.environ.get("STEPS", "150"))
R1 = "cccccccc-0000-4000-8000-000000000001"
R2 = "cccccccc-0000-4000-8000-000000000002"

srv = Server("keys")
srv.exec("""
CREATE EXTENSION citext;
CREATE TYPE kind AS ENUM ('bug', 'feature');
CREATE DOMAIN code AS text COLLATE "und-x-icu" CHECK (VALUE <> '');
CREATE TABLE project (id varchar PRIMARY KEY, owner uuid NOT NULL, name text NOT NULL);
CREATE TABLE issue (id varchar PRIMARY KEY, "projectID" varchar NOT NULL REFERENCES project,
                    title text NOT NULL);
CREATE INDEX ON issue ("projectID");
CREATE TABLE comment (id varchar PRIMARY KEY, "issueID" varchar NOT NULL REFERENCES issue, body text NOT NULL);
CREATE INDEX ON comment ("issueID");
CREATE TABLE label (id text COLLATE "en-x-icu" PRIMARY KEY, "projectID" varchar NOT NULL REFERENCES project,
                    kind kind NOT NULL, UNIQUE (id, "projectID", kind));
CREATE INDEX ON label ("projectID");
CREATE TABLE "issueLabel" ("issueID" varchar NOT NULL REFERENCES issue, "labelID" text COLLATE "en-x-icu" NOT NULL,
                           "projectID" varchar NOT NULL, kind kind NOT NULL, PRIMARY KEY ("issueID", "labelID"),
                           FOREIGN KEY ("labelID", "projectID", kind) REFERENCES label (id, "projectID", kind));
CREATE INDEX ON "issueLabel" ("labelID");
CREATE TABLE account (id int PRIMARY KEY, email citext NOT NULL, "projectID" varchar NOT NULL REFERENCES project);
CREATE UNIQUE INDEX account_email ON account (email);
CREATE INDEX ON account ("projectID");
CREATE TABLE login (id int PRIMARY KEY, email citext NOT NULL REFERENCES account (email) ON UPDATE CASCADE,
                    at text NOT NULL);
CREATE INDEX ON login (email);
CREATE TABLE slot (shelf code, n smallint, at uuid, "projectID" varchar NOT NULL REFERENCES project,
                   PRIMARY KEY (shelf, n, at));
CREATE INDEX ON slot ("projectID");
CREATE TABLE item (id bigint PRIMARY KEY, shelf code NOT NULL, n smallint NOT NULL, at uuid NOT NULL,
                   qty int NOT NULL, FOREIGN KEY (shelf, n, at) REFERENCES slot);
CREATE INDEX ON item (at, n, shelf);
""")
srv.exec(f"""
INSERT INTO project VALUES ('p1', '{R1}', 'one'), ('p2', '{R2}', 'two'), ('p3', '{R1}', 'three');
INSERT INTO issue SELECT 'i' || g, 'p' || (1 + g % 3), 't' FROM generate_series(1, 30) g;
INSERT INTO comment SELECT 'c' || g, 'i' || (1 + g % 30), 'b' FROM generate_series(1, 120) g;
INSERT INTO label SELECT 'L' || g, 'p' || (1 + g % 3), (ARRAY['bug', 'feature'])[1 + g % 2]::kind
  FROM generate_series(1, 12) g;
INSERT INTO account SELECT g, 'User' || g || '@Example.com', 'p' || (1 + g % 3) FROM generate_series(1, 12) g;
INSERT INTO login SELECT g, 'user' || (1 + g % 12) || '@example.COM', 'x' FROM generate_series(1, 40) g;
INSERT INTO slot SELECT 's' || (1 + g % 6), g, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid,
                        'p' || (1 + g % 3) FROM generate_series(1, 24) g;
INSERT INTO item SELECT g, s.shelf, s.n, s.at, 1 FROM generate_series(1, 48) g JOIN slot s ON s.n = 1 + g % 24;
""")
for t, rule in [("project", "assigned(owner)"), ("issue", 'follows("projectID")'),
                ("comment", 'follows("issueID")'), ("label", 'follows("projectID")'),
                ('"issueLabel"', 'follows("issueID")'), ("account", 'follows("projectID")'),
                ("login", "follows(email)"), ("slot", 'follows("projectID")'), ("item", "follows(shelf)")]:
    srv.exec("SELECT sync.mirror(%s, 'catalog', %s)", (t, rule))
check("every foreign key has its index", srv.rows("SELECT * FROM sync.check()"), [])
for r in (R1, R2):
    srv.exec("SELECT sync.replica_add(%s)", (r,))
replicas = [Replica(srv, R1), Replica(srv, R2)]
KEYS = {"project": ["id"], "issue": ["id"], "comment": ["id"], "label": ["id"], "issueLabel": ["issueID", "labelID"],
        "account": ["id"], "login": ["id"], "slot": ["shelf", "n", "at"], "item": ["id"]}
# each replica's rows whose parent it lacks, by the server's equality (citext: case aside)
ORPHANS = [
    'SELECT count(*) FROM issue c WHERE NOT EXISTS (SELECT 1 FROM project p WHERE p.id = c."projectID")',
    'SELECT count(*) FROM comment c WHERE NOT EXISTS (SELECT 1 FROM issue p WHERE p.id = c."issueID")',
    'SELECT count(*) FROM label c WHERE NOT EXISTS (SELECT 1 FROM project p WHERE p.id = c."projectID")',
    'SELECT count(*) FROM "issueLabel" c WHERE NOT EXISTS (SELECT 1 FROM issue p WHERE p.id = c."issueID")',
    'SELECT count(*) FROM "issueLabel" c WHERE NOT EXISTS (SELECT 1 FROM label p WHERE p.id = c."labelID"'
    ' AND p."projectID" = c."projectID" AND p.kind = c.kind)',
    'SELECT count(*) FROM account c WHERE NOT EXISTS (SELECT 1 FROM project p WHERE p.id = c."projectID")',
    'SELECT count(*) FROM login c WHERE NOT EXISTS (SELECT 1 FROM account p WHERE lower(p.email) = lower(c.email))',
    'SELECT count(*) FROM slot c WHERE NOT EXISTS (SELECT 1 FROM project p WHERE p.id = c."projectID")',
    'SELECT count(*) FROM item c WHERE NOT EXISTS (SELECT 1 FROM slot p WHERE p.shelf = c.shelf AND p.n = c.n'
    ' AND p.at = c.at)',
]


def orphans(r):
    return sum(r.one(q) for q in ORPHANS)


rng = random.Random(SEED)


def pick(sql):
    return rng.choice([r[0] for r in srv.rows(sql)])


def step(n):
    k = rng.randrange(12)
    if k == 0:
        srv.exec("UPDATE comment SET body = body || 'x' WHERE id = %s", (pick("SELECT id FROM comment"),))
    elif k == 1:
        srv.exec("UPDATE comment SET \"issueID\" = %s WHERE id = %s",
                 (pick("SELECT id FROM issue"), pick("SELECT id FROM comment")))
    elif k == 2:
        srv.exec("UPDATE issue SET title = title || 'x' WHERE id = %s", (pick("SELECT id FROM issue"),))
    elif k == 3:
        srv.exec("UPDATE issue SET \"projectID\" = %s WHERE id = %s",
                 (pick("SELECT id FROM project"), pick("SELECT id FROM issue")))
    elif k == 4:
        i, pr = srv.rows("SELECT id, \"projectID\" FROM issue ORDER BY random() LIMIT 1")[0]
        lab = srv.rows("SELECT id, \"projectID\", kind FROM label ORDER BY random() LIMIT 1")[0]
        srv.exec("DELETE FROM \"issueLabel\" WHERE \"issueID\" = %s", (i,))
        srv.exec("INSERT INTO \"issueLabel\" VALUES (%s, %s, %s, %s)", (i,) + lab)
    elif k == 5:
        srv.exec("UPDATE project SET owner = CASE owner WHEN %s THEN %s::uuid ELSE %s::uuid END WHERE id = %s",
                 (R1, R2, R1, pick("SELECT id FROM project")))
    elif k == 6:
        a = pick("SELECT id FROM account")
        srv.exec("UPDATE account SET email = %s WHERE id = %s", (f"Moved{n}@example.com", a))
    elif k == 7:
        srv.exec("UPDATE login SET email = upper(%s) WHERE id = %s",
                 (pick("SELECT email::text FROM account"), pick("SELECT id FROM login")))
    elif k == 8:
        srv.exec("UPDATE account SET \"projectID\" = %s WHERE id = %s",
                 (pick("SELECT id FROM project"), pick("SELECT id FROM account")))
    elif k == 9:
        s = srv.rows("SELECT shelf, n, at FROM slot ORDER BY random() LIMIT 1")[0]
        srv.exec("UPDATE item SET shelf = %s, n = %s, at = %s WHERE id = %s", s + (pick("SELECT id FROM item"),))
    elif k == 10:
        srv.exec("UPDATE slot SET \"projectID\" = %s WHERE n = %s",
                 (pick("SELECT id FROM project"), pick("SELECT n FROM slot")))
    else:
        c = pick("SELECT id FROM comment")
        srv.exec("DELETE FROM comment WHERE id = %s", (c,))
        srv.exec("INSERT INTO comment VALUES (%s, %s, 'again')", (c, pick("SELECT id FROM issue")))


def holds(r):
    has = {t: r.keys(t, cols) for t, cols in KEYS.items()}
    return {t: k for t, k in has.items() if k}


settle(srv, replicas)
mismatches = 0
orphaned = 0
for n in range(STEPS):
    step(n)
    settle(srv, replicas)
    for r in replicas:
        wanted, held, has, bad = srv.wanted(r.id), srv.held(r.id), holds(r), orphans(r)
        orphaned += bad
        if not (held == wanted and has == wanted):
            mismatches += 1
            if mismatches <= 5:
                for t in set(wanted) | set(held) | set(has):
                    w, h, f = wanted.get(t, set()), held.get(t, set()), has.get(t, set())
                    if w != h or w != f:
                        print(f"step {n} (seed {SEED}) {r.id[-4:]} {t}: wanted-held {w - h} held-wanted {h - w}"
                              f" file-wanted {f - w} wanted-file {w - f}")
check(f"after each of {STEPS} steps, every replica holds exactly what it should", mismatches, 0)
check("no replica holds a row without the rows it points at", orphaned, 0)
check("both replicas hold rows of every table",
      [sorted(holds(r)) == sorted(KEYS) for r in replicas], [True, True])
check("logins point at accounts in another case", srv.one(
    "SELECT count(*) > 0 FROM login l JOIN account a ON a.email = l.email WHERE a.email::text <> l.email::text"), True)
finish()
