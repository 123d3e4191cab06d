"""realwalk.py - the plan agrees with the oracle on a schema nobody here wrote:
Rocicorp's zbugs (realschema.sql says where it comes from and what a
magic_sync user adds to it), with text keys everywhere, composite foreign
keys, a foreign key to a unique constraint that is not the primary key
(or, on a build that refuses one, the declared variant realschema.sql
falls back to: the walk says which), and families from one child to many.

Three devices (replicas) are given projects through teams (grouped); issues
follow their project, and their labels, notifications, view states and
comments follow them; labels go to the devices of their project (the
partition); comments are records the devices write.  A seeded random walk of
writes: on the server, issues inserted, edited, moved to another project,
deleted, given another key; comments written by the web, moved to another
issue, deleted; labels made, renamed, given another key, put on issues and
taken off; view states and notifications; users and projects; a team given a
project or a device, or losing one; on a device, a comment written, edited,
moved to another issue it holds, deleted.  Some keys hold characters a key's
text must escape (a comma, a quote, a space, a backslash, non-ASCII).

After every step a relay pass (sync.relay_pass), every device applies,
acknowledges and files, until settled; then for every device:
  - what the engine records it holds, acknowledged, equals sync.wanted;
  - its SQLite file holds exactly those rows, with the server's values;
  - it holds no row without the rows it points at;
and every comment a device wrote is on the server as it last wrote it,
unless a delete took it.

    tests/e2e/run realwalk.py        (SEED=n STEPS=n to vary; tests/e2e/long.sh runs it long)
"""
import os
import random
import sqlite3
import tempfile
import time

from harness import Replica, Server, check, finish
from walk import progress, release_lock

SEED = int(os.environ.get("SEED", "20261206"))
STEPS = int(os.environ.get("STEPS", "100"))
HERE = os.path.dirname(os.path.abspath(__file__))
DEVICES = ["dddddddd-0000-4000-8000-00000000000%d" % i for i in range(1, 4)]
WEB = "eeeeeeee-0000-4000-8000-000000000000"     # comments the web app writes: no replica
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
ODD = [",", '"', " ", "\\", "é", "(", "'", "{", "}", "ü"]

rng = random.Random(SEED)


def nanoid(n=12):
    """A text id as zbugs makes them; one in eight holds a character a key's text escapes."""
    s = "".join(rng.choice(ALPHABET) for _ in range(n))
    if rng.randrange(8) == 0:
        i = rng.randrange(1, n)
        s = s[:i] + rng.choice(ODD) + s[i:]
    return s


srv = Server("realwalk")
srv.exec(open(os.path.join(HERE, "realschema.sql")).read())
VARIANT = srv.one("SELECT realschema_variant()")
print(f"schema: zbugs (rocicorp/mono apps/zbugs), {VARIANT}", flush=True)
KEYS = {name: list(key) for name, key in srv.rows("SELECT name, key::text[] FROM sync.mirrors")}
TABLES = {name: table for name, table in srv.rows("SELECT name, \"table\"::text FROM sync.mirrors")}
# foreign keys between mirrored tables: child, its columns, parent, the parent's columns
FKS = srv.rows(
    "SELECT c.relname::text, ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY u(n, i)"
    "         JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.i),"
    "       p.relname::text, ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY u(n, i)"
    "         JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.i)"
    "  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid"
    " WHERE k.contype = 'f' AND k.conrelid IN (SELECT relid FROM sync.tables)"
    "   AND k.confrelid IN (SELECT relid FROM sync.tables)")


def q(name):
    return '"' + name.replace('"', '""') + '"'


# the seed: users, four projects (families of 30 issues, 5, 1 and none),
# labels, teams; one issue with 25 comments, the others a few
users = [nanoid() for _ in range(10)]
for i, u in enumerate(users):
    srv.exec('INSERT INTO "user" (id, login, name, "githubID") VALUES (%s, %s, %s, %s)', (u, f"login{i}", f"User {i}", i))
projects = {}
for name, issues in (("zero", 30), ("mid", 5), ("solo", 1), ("empty", 0)):
    pid = nanoid()
    projects[name] = pid
    srv.exec('INSERT INTO project (id, name, "lowerCaseName") VALUES (%s, %s, %s)', (pid, name.title(), name))
    labels = [nanoid() for _ in range(3)]
    for lab in labels:
        srv.exec('INSERT INTO label (id, name, "projectID") VALUES (%s, %s, %s)', (lab, f"label {lab[:4]}", pid))
    for _ in range(issues):
        iid = nanoid()
        srv.exec('INSERT INTO issue (id, title, open, "projectID", "creatorID", "assigneeID") VALUES (%s, %s, %s, %s, %s, %s)',
                 (iid, f"issue {iid[:5]}", rng.random() < 0.7, pid, rng.choice(users), rng.choice([None] + users)))
        srv.exec('INSERT INTO "issueLabel" VALUES (%s, %s, %s)', (rng.choice(labels), iid, pid))
        for _ in range(rng.randrange(3)):
            srv.exec('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")'
                     ' VALUES (%s, %s, 1, %s, %s, %s)', (nanoid(), iid, "a comment", rng.choice(users), WEB))
big = srv.one('SELECT id FROM issue WHERE "projectID" = %s ORDER BY id LIMIT 1', (projects["zero"],))
for _ in range(25):
    srv.exec('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID") VALUES (%s, %s, 1, %s, %s, %s)',
             (nanoid(), big, "one of many", rng.choice(users), WEB))
teams = [nanoid() for _ in range(3)]
for t in teams:
    srv.exec("INSERT INTO team VALUES (%s, %s)", (t, "team " + t[:4]))
for t, p in ((0, "zero"), (0, "solo"), (1, "mid"), (2, "empty"), (2, "mid")):
    srv.exec('INSERT INTO "teamProject" VALUES (%s, %s)', (teams[t], projects[p]))
for t, d in ((0, 0), (0, 1), (1, 2)):
    srv.exec('INSERT INTO "teamDevice" VALUES (%s, %s)', (teams[t], DEVICES[d]))
# a device's partition is a project: it is sent that project's labels
PARTITIONS = [projects["zero"], projects["mid"], projects["solo"]]
for d, p in zip(DEVICES, PARTITIONS):
    srv.exec("SELECT sync.replica_add(%s, %s)", (d, p))
tmp = tempfile.mkdtemp()
replicas = [Replica(srv, d, os.path.join(tmp, f"{i}.db")) for i, d in enumerate(DEVICES)]
release_lock()

history = []            # the writes of the last steps, for saying what led to a mismatch
mine = {}               # (device, comment id) -> body: what every device wrote and no delete took
done = {"device writes": 0}


def write(sql, args=None):
    history[-1].append((sql, args))
    srv.exec(sql, args)


def pick(sql, args=None):
    rows = srv.rows(sql, args)
    return rng.choice(rows) if rows else None


def forget_comments(where, args):
    """A server delete takes these comments: the devices' ones leave the model."""
    for dev, cid in srv.rows(f'SELECT "deviceID"::text, id FROM comment WHERE {where}', args):
        mine.pop((dev, cid), None)


def server_step(kind):
    user = rng.choice([u for (u,) in srv.rows('SELECT id FROM "user"')])
    if kind == 0:                                   # a new issue, with a label of its project
        p = pick('SELECT p.id FROM project p')[0]
        iid = nanoid()
        lab = pick('SELECT id FROM label WHERE "projectID" = %s', (p,))
        write('INSERT INTO issue (id, title, open, "projectID", "creatorID") VALUES (%s, %s, true, %s, %s);'
              + ('INSERT INTO "issueLabel" VALUES (%s, %s, %s)' if lab else 'SELECT %s, %s, %s'),
              (iid, "new " + iid[:4], p, user, lab[0] if lab else None, iid, p))
    elif kind == 1:                                 # an issue edited: its title, open, its assignee (a parent)
        i = pick("SELECT id FROM issue")
        if i:
            write('UPDATE issue SET title = title || %s, open = NOT open, "assigneeID" = %s, modified = modified + 1'
                  ' WHERE id = %s', ("+", rng.choice([None, user]), i[0]))
    elif kind == 2:                                 # an issue moves to another project: its labels go, one of the new project's comes
        i = pick('SELECT id, "projectID" FROM issue')
        p = pick("SELECT id FROM project")
        if i and p and i[1] != p[0]:
            lab = pick('SELECT id FROM label WHERE "projectID" = %s', (p[0],))
            write('DELETE FROM "issueLabel" WHERE "issueID" = %s; UPDATE issue SET "projectID" = %s WHERE id = %s;'
                  + ('INSERT INTO "issueLabel" VALUES (%s, %s, %s)' if lab else 'SELECT %s, %s, %s'),
                  (i[0], p[0], i[0], lab[0] if lab else None, i[0], p[0]))
    elif kind == 3:                                 # an issue deleted: its children go with it
        i = pick("SELECT id FROM issue")
        if i:
            forget_comments('"issueID" = %s', (i[0],))
            write("DELETE FROM issue WHERE id = %s", (i[0],))
    elif kind == 4:                                 # an issue's key changes: its children are made again under it
        i = pick('SELECT id, "projectID" FROM issue i WHERE NOT EXISTS (SELECT FROM comment c WHERE c."issueID" = i.id)')
        if i:
            new = nanoid()
            write('CREATE TEMP TABLE kept_labels ON COMMIT DROP AS SELECT * FROM "issueLabel" WHERE "issueID" = %s;'
                  'CREATE TEMP TABLE kept_views ON COMMIT DROP AS SELECT * FROM "viewState" WHERE "issueID" = %s;'
                  'CREATE TEMP TABLE kept_notes ON COMMIT DROP AS SELECT * FROM "issueNotifications" WHERE "issueID" = %s;'
                  'DELETE FROM "issueLabel" WHERE "issueID" = %s; DELETE FROM "viewState" WHERE "issueID" = %s;'
                  'DELETE FROM "issueNotifications" WHERE "issueID" = %s;'
                  'UPDATE issue SET id = %s WHERE id = %s;'
                  'INSERT INTO "issueLabel" SELECT "labelID", %s, "projectID" FROM kept_labels;'
                  'INSERT INTO "viewState" SELECT "userID", %s, viewed FROM kept_views;'
                  'INSERT INTO "issueNotifications" SELECT "userID", %s, subscribed, created FROM kept_notes',
                  (i[0],) * 6 + (new, i[0], new, new, new))
    elif kind == 5:                                 # the web writes a comment
        i = pick("SELECT id FROM issue")
        if i:
            write('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID") VALUES (%s, %s, 2, %s, %s, %s)',
                  (nanoid(), i[0], "from the web", user, WEB))
    elif kind == 6:                                 # a comment moves to another issue (an admin's fix)
        c = pick('SELECT "deviceID"::text, id FROM comment')
        i = pick("SELECT id FROM issue")
        if c and i:
            write('UPDATE comment SET "issueID" = %s, hlc = hlc + 1 WHERE "deviceID" = %s AND id = %s', (i[0], c[0], c[1]))
    elif kind == 7:                                 # a comment deleted on the server
        c = pick('SELECT "deviceID"::text, id FROM comment')
        if c:
            mine.pop((c[0], c[1]), None)
            write('DELETE FROM comment WHERE "deviceID" = %s AND id = %s', (c[0], c[1]))
    elif kind == 8:                                 # a label made, renamed, or given another key with its issues
        k = rng.randrange(3)
        p = pick("SELECT id FROM project")[0]
        if k == 0:
            write('INSERT INTO label (id, name, "projectID") VALUES (%s, %s, %s)', (nanoid(), "made", p))
        elif k == 1:
            lab = pick("SELECT id FROM label")
            write("UPDATE label SET name = name || '!' WHERE id = %s", (lab[0],))
        else:
            lab = pick('SELECT id, "projectID" FROM label')
            new = nanoid()
            write('CREATE TEMP TABLE kept ON COMMIT DROP AS SELECT * FROM "issueLabel" WHERE "labelID" = %s;'
                  'DELETE FROM "issueLabel" WHERE "labelID" = %s; UPDATE label SET id = %s WHERE id = %s;'
                  'INSERT INTO "issueLabel" SELECT %s, "issueID", "projectID" FROM kept',
                  (lab[0], lab[0], new, lab[0], new))
    elif kind == 9:                                 # a label put on an issue, taken off, or swapped (a key change)
        k = rng.randrange(3)
        if k == 0:
            i = pick('SELECT i.id, l.id, i."projectID" FROM issue i JOIN label l USING ("projectID")'
                     ' WHERE NOT EXISTS (SELECT FROM "issueLabel" x WHERE x."issueID" = i.id AND x."labelID" = l.id)')
            if i:
                write('INSERT INTO "issueLabel" VALUES (%s, %s, %s)', (i[1], i[0], i[2]))
        elif k == 1:
            x = pick('SELECT "labelID", "issueID" FROM "issueLabel"')
            if x:
                write('DELETE FROM "issueLabel" WHERE "labelID" = %s AND "issueID" = %s', x)
        else:
            x = pick('SELECT x."labelID", x."issueID", l.id FROM "issueLabel" x JOIN label l USING ("projectID")'
                     ' WHERE l.id <> x."labelID" AND NOT EXISTS (SELECT FROM "issueLabel" y'
                     '  WHERE y."issueID" = x."issueID" AND y."labelID" = l.id)')
            if x:
                write('UPDATE "issueLabel" SET "labelID" = %s WHERE "labelID" = %s AND "issueID" = %s', (x[2], x[0], x[1]))
    elif kind == 10:                                # a user views an issue, or stops following it
        i = pick("SELECT id FROM issue")
        if i:
            if rng.randrange(2):
                write('INSERT INTO "viewState" VALUES (%s, %s, %s) ON CONFLICT ("userID", "issueID")'
                      ' DO UPDATE SET viewed = excluded.viewed', (user, i[0], rng.randrange(10 ** 6)))
            else:
                write('INSERT INTO "issueNotifications" ("userID", "issueID") VALUES (%s, %s) ON CONFLICT ("userID", "issueID")'
                      ' DO UPDATE SET subscribed = NOT "issueNotifications".subscribed', (user, i[0]))
    elif kind == 11:
        k = rng.randrange(3)
        if k == 0:
            write('DELETE FROM "viewState" WHERE ("userID", "issueID") IN (SELECT "userID", "issueID" FROM "viewState"'
                  ' ORDER BY random() LIMIT 1)')
        elif k == 1:                                # a user renamed, or a new one
            write('UPDATE "user" SET name = name || %s WHERE id = %s', ("'", user))
        else:
            u = nanoid()
            write('INSERT INTO "user" (id, login, "githubID") VALUES (%s, %s, (SELECT max("githubID") + 1 FROM "user"))',
                  (u, "l" + u))
    elif kind == 12:                                # a team given a project, or losing one
        t, p = rng.choice(teams), pick("SELECT id FROM project")[0]
        if srv.one('SELECT count(*) FROM "teamProject" WHERE "teamID" = %s AND "projectID" = %s', (t, p)):
            write('DELETE FROM "teamProject" WHERE "teamID" = %s AND "projectID" = %s', (t, p))
        else:
            write('INSERT INTO "teamProject" VALUES (%s, %s)', (t, p))
    elif kind == 13:                                # a device joins a team, or leaves one
        t, d = rng.choice(teams), rng.choice(DEVICES)
        if srv.one('SELECT count(*) FROM "teamDevice" WHERE "teamID" = %s AND "deviceID" = %s', (t, d)):
            write('DELETE FROM "teamDevice" WHERE "teamID" = %s AND "deviceID" = %s', (t, d))
        else:
            write('INSERT INTO "teamDevice" VALUES (%s, %s)', (t, d))
    else:                                           # a project renamed, or a new one
        if rng.randrange(2):
            write("UPDATE project SET name = name || '.' WHERE id = %s", (pick("SELECT id FROM project")[0],))
        else:
            p = nanoid()
            write('INSERT INTO project (id, name, "lowerCaseName") VALUES (%s, %s, %s)', (p, "P" + p, p.lower() + p))


def device_step(r):
    """A device writes a comment, edits, moves or deletes one of its own."""
    if not r.provisioned():
        return
    k = rng.randrange(5)
    try:
        issues = [i for (i,) in r.q("SELECT id FROM issue")]
        users_held = [u for (u,) in r.q('SELECT id FROM "user"')]
    except sqlite3.OperationalError:
        return
    own = [c for (c,) in r.q('SELECT id FROM comment WHERE "deviceID" = ?', (r.id,))] if issues else []
    if k <= 1 and issues and users_held:
        cid, body = nanoid(), f"said on {r.id[-1]}"
        history[-1].append(("device writes", r.id[-1], cid))
        r.q('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID") VALUES (?, ?, 3, ?, ?, ?)',
            (cid, rng.choice(issues), body, rng.choice(users_held), r.id))
        mine[(r.id, cid)] = body
        done["device writes"] += 1
    elif k == 2 and own:
        cid = rng.choice(own)
        body = f"edited {rng.randrange(1000)}"
        history[-1].append(("device edits", r.id[-1], cid))
        r.q('UPDATE comment SET body = ? WHERE "deviceID" = ? AND id = ?', (body, r.id, cid))
        mine[(r.id, cid)] = body
    elif k == 3 and own and issues:
        cid = rng.choice(own)
        history[-1].append(("device moves", r.id[-1], cid))
        r.q('UPDATE comment SET "issueID" = ? WHERE "deviceID" = ? AND id = ?', (rng.choice(issues), r.id, cid))
    elif k == 4 and own:
        cid = rng.choice(own)
        history[-1].append(("device deletes", r.id[-1], cid))
        r.q('DELETE FROM comment WHERE "deviceID" = ? AND id = ?', (r.id, cid))
        mine.pop((r.id, cid), None)


passes = 0


def settle():
    global passes
    for _ in range(6):
        passes += 1
        srv.relay()
        moved = False
        for r in replicas:
            for applied, filed in r.sync():
                moved |= bool(applied) or (filed is not None and filed.get("filed", 0) > 0)
        if not moved and srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") == 0:
            return


def norm(v):
    """A value as both sides compare it: booleans as 0/1, numbers as floats."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return float(v)
    return v


def file_rows(r, table):
    """The device's live rows of a table: {canonical key: {column: value}}."""
    try:
        cols = [c[1] for c in r.q(f"PRAGMA table_info({q(table)})")]
        keyc = ", ".join(q(c) for c in KEYS[table])
        rows = r.q(f"SELECT sync_key({keyc}), * FROM {q(table)} WHERE sync_key({keyc}) NOT IN"
                   " (SELECT key FROM _sync_retired WHERE tbl = ?)", (table,))
    except sqlite3.OperationalError:
        return {}
    return {row[0]: {c: norm(v) for c, v in zip(cols, row[1:])} for row in rows}


def server_rows(table, columns):
    keyc = ", ".join(q(c) + "::text" for c in KEYS[table])
    sel = ", ".join(q(c) for c in columns)
    return {row[0]: {c: norm(v) for c, v in zip(columns, row[1:])}
            for row in srv.rows(f"SELECT sync.key(ARRAY[{keyc}]), {sel} FROM {TABLES[table]}")}


def orphans(r):
    bad = 0
    for child, ccols, parent, pcols in FKS:
        cond = " AND ".join(f"p.{q(pc)} = c.{q(cc)}" for cc, pc in zip(ccols, pcols))
        notnull = " AND ".join(f"c.{q(cc)} IS NOT NULL" for cc in ccols)
        try:
            bad += r.one(f"SELECT count(*) FROM {q(child)} c WHERE {notnull}"
                         f" AND NOT EXISTS (SELECT 1 FROM {q(parent)} p WHERE {cond})")
        except sqlite3.OperationalError:
            pass
    return bad


started = time.time()
settle()
snapshots = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
seen = {t: 0 for t in KEYS}
mismatches = 0
wrong_values = 0
orphaned = 0
lost = 0
for n in range(STEPS):
    history = history[-7:] + [[]]
    kind = rng.randrange(20)
    if kind < 15:
        server_step(kind)
    else:
        device_step(rng.choice(replicas))
    settle()
    if n % 1000 == 999:
        progress(f"step {n + 1}: {time.time() - started:.0f} s, mismatches {mismatches}")
    for t in seen:
        seen[t] = max(seen[t], srv.one(f"SELECT count(*) FROM {TABLES[t]}"))
    servers = {}            # the server's rows of a table, read once a step
    for r in replicas:
        wanted, held = srv.wanted(r.id), srv.held(r.id)
        files = {t: file_rows(r, t) for t in KEYS}
        has = {t: set(rows) for t, rows in files.items() if rows}
        o = orphans(r)
        orphaned += o
        if not (held == wanted and has == wanted and o == 0):
            mismatches += 1
            if mismatches <= 5:
                print(f"step {n} (seed {SEED}) device {r.id[-1]}: held==wanted {held == wanted},"
                      f" file==wanted {has == wanted}, orphans {o}")
                for i, writes in enumerate(history):
                    print(f"   step {n - len(history) + 1 + i} wrote {writes}")
                for t in set(wanted) | set(held) | set(has):
                    w, h, f = wanted.get(t, set()), held.get(t, set()), has.get(t, set())
                    if w != h or w != f:
                        print(f"   {t}: wanted-held {w - h} held-wanted {h - w} file-wanted {f - w} wanted-file {w - f}")
        for t, keys in wanted.items():
            mine_rows = files[t]
            cols = tuple(sorted({c for row in mine_rows.values() for c in row}))
            if (t, cols) not in servers:
                servers[(t, cols)] = server_rows(t, cols) if cols else {}
            theirs = servers[(t, cols)]
            differ = [k for k in keys if k in mine_rows and mine_rows[k] != theirs.get(k)]
            if differ:
                wrong_values += 1
                if wrong_values <= 5:
                    k = differ[0]
                    print(f"step {n} (seed {SEED}) device {r.id[-1]}: {len(differ)} rows of {t} differ from the server's,"
                          f" e.g. {k}: {mine_rows[k]} against {theirs.get(k)}")
    on_server = dict(((d, c), b) for d, c, b in srv.rows('SELECT "deviceID"::text, id, body FROM comment WHERE "deviceID" <> %s', (WEB,)))
    gone = {k: v for k, v in mine.items() if on_server.get(k) != v}
    if gone:
        lost += 1
        if lost <= 5:
            print(f"step {n} (seed {SEED}): comments devices wrote not on the server as they wrote them: {gone}")

print(f"steps: {STEPS}, {STEPS / (time.time() - started):.1f} steps/s; passes: {passes}; mismatches: {mismatches},"
      f" rows differing: {wrong_values}, orphans: {orphaned}, device comments lost: {lost};"
      f" most rows: " + ", ".join(f"{t} {n}" for t, n in sorted(seen.items())), flush=True)
check(f"after each of {STEPS} random steps, every device holds exactly what it should", mismatches, 0)
check("after each step, every row a device holds has the server's values", wrong_values, 0)
check("no device holds a row without the rows it points at", orphaned, 0)
check("every comment a device wrote is on the server as it last wrote it, unless deleted", lost, 0)
check(f"devices wrote comments: {done['device writes']}", done["device writes"] >= STEPS // 20, True)
check("provisionings were rare: only the first", dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas")),
      snapshots)
finish()
