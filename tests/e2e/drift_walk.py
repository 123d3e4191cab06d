#!/usr/bin/python3
"""drift_walk.py - issue 40's two drifts, as a user met them, on Rocicorp's
zbugs schema (tests/e2e/realschema.sql, the public schema zbugs_walk.py
loads), with the relay as the server's background worker and
magic_sync_agent as a real process per device, polling, each file's
digest_interval DRIFT_DIGEST seconds (default 2).  Kept apart from the
suite: make check-long runs it (tests/e2e/long.sh), tests/e2e/run does not
unless named.

  - The refused delete: device B deletes, in its file, a comment the web
    app wrote (a record in another's name).  Its agent files the delete;
    the server refuses it ("a replica writes and deletes only its own
    records").  Before, B then held one row fewer than the server recorded,
    for good, and every read said caught_up.  Now: B holds the row again
    before its digest is recorded as matching even once (within one digest
    round), and from the moment the delete is filed until the row is back
    no read of B's state says caught_up.
  - A value corrupted in device A's file, written with sqlite3 behind the
    engine's back (its triggers dropped, no note): A's next digest catches
    it and the value is sent back; the walk prints how many rows went down
    for it (`drift values: N rows`): narrowed down by ranges of values
    hashes, the corrupted row (at most 5), not the table A holds, and no
    snapshot.

  DRIFT_SCALE (default 0.02 of zbugs' published sizes), DRIFT_DEADLINE
  (seconds a repair may take, default 120).  Run by tests/e2e/run
  drift_walk.py (inside pg_virtualenv)."""
import json
import os
import sqlite3
import subprocess
import tempfile
import threading
import time

from harness import EXTENSION, TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
SCHEMA = os.path.join(TOP, "tests", "e2e", "realschema.sql")
SCALE = float(os.environ.get("DRIFT_SCALE", "0.02"))
DIGEST = int(os.environ.get("DRIFT_DIGEST", "2"))
DEADLINE = float(os.environ.get("DRIFT_DEADLINE", "120"))
A = "40400000-0000-4000-8000-00000000000a"
B = "40400000-0000-4000-8000-00000000000b"
WEB = "eeeeeeee-0000-4000-8000-000000000000"   # comments written by the web app: no device
FAMILIES = [("zero", 20000), ("replicache", 1000)]
PARTITION = {A: "zero", B: "replicache"}
DB = "drift"
tmp = tempfile.mkdtemp(prefix="drift.")
began = time.monotonic()


def pid(name):
    return f"left(md5('p{name}'), 21)"


def say(what):
    print(f"drift: {what} ({time.monotonic() - began:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)


def wait_for(seconds, test):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if test():
            return True
        time.sleep(0.2)
    return test()


srv = Server(DB)
srv.exec(open(SCHEMA).read())
say(f"schema: {srv.one('SELECT realschema_variant()')}")
users = max(10, round(2000 * SCALE))
srv.exec("""INSERT INTO "user" (id, login, name, "githubID")
            SELECT left(md5('u' || g), 21), 'login' || g, 'User ' || g, g FROM generate_series(1, %s) g""", (users,))
first = 1
for name, size in FAMILIES:
    n = max(1, round(size * SCALE))
    srv.exec(f"""INSERT INTO project (id, name, "lowerCaseName") VALUES ({pid(name)}, %s, %s)""", (name.title(), name))
    # labels name the partition (realschema.sql: label is broadcast by "projectID")
    srv.exec(f"""INSERT INTO label (id, name, "projectID")
                 SELECT left(md5('l{name}' || k), 21), 'label ' || k, {pid(name)} FROM generate_series(0, 4) k""")
    srv.exec(f"""INSERT INTO issue (id, title, open, "projectID", "creatorID", description)
                 SELECT left(md5('i' || g), 21), 'issue ' || g, g %% 3 <> 0, {pid(name)},
                        left(md5('u' || (1 + g %% %s)), 21), 'what happened in ' || g
                   FROM generate_series(%s, %s) g""", (users, first, first + n - 1))
    first += n
srv.exec("""INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")
            SELECT left(md5('d' || i.id || k), 21), i.id, k, 'said ' || k, i."creatorID", %s
              FROM issue i, generate_series(1, 2) k""", (WEB,))
for d, p in PARTITION.items():
    srv.exec("INSERT INTO team VALUES (%s, %s)", (p, p))
    srv.exec(f"""INSERT INTO "teamProject" VALUES (%s, {pid(p)})""", (p,))
    srv.exec('INSERT INTO "teamDevice" VALUES (%s, %s)', (p, d))
srv.exec("TRUNCATE sync.notes")
for d in (A, B):
    srv.exec(f"SELECT sync.replica_add(%s, {pid(PARTITION[d])})", (d,))
# a values repair of a table may come again at once (values_settings.py bounds it)
srv.exec(f"ALTER DATABASE {DB} SET magic_sync.values_repair_interval = 0")

# ---- the relay as deployed: the server's background worker --------------------------
for k, v in {"magic_sync.database": DB, "magic_sync.naptime": "200"}.items():
    srv.exec(f"ALTER SYSTEM SET {k} = '{v}'")
srv.conn.close()
subprocess.run(["pg_ctlcluster", os.environ.get("PGVERSION", "15"), "regress", "restart", "-m", "fast"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
srv = Server(DB, create=False)
check("the relay worker runs", wait_for(30, lambda: srv.one(
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'") == 1), True)

# ---- one agent a device, polling ----------------------------------------------------
paths = {d: os.path.join(tmp, f"{d[-1]}.db") for d in (A, B)}
events = {d: [] for d in (A, B)}
agents = {}


def reader(d, out):
    for line in out:
        if line.startswith("{"):
            events[d].append(json.loads(line))


for d in (A, B):
    agents[d] = subprocess.Popen([AGENT, "--server", f"dbname={DB}", "--replica", d, "--db", paths[d],
                                  "--interval", "1000", "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=reader, args=(d, agents[d].stdout), daemon=True).start()


def opened(d, engine=True):
    db = sqlite3.connect(paths[d], isolation_level=None, timeout=30)
    if engine:
        db.enable_load_extension(True)
        db.load_extension(EXTENSION)
    return db


def one(d, sql, args=(), engine=True):
    db = opened(d, engine)
    try:
        return db.execute(sql, args).fetchone()[0]
    finally:
        db.close()


def configured(d):
    try:
        return one(d, "SELECT sync_config('digest_interval', ?)", (DIGEST,)) is not None
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            return False
        raise


def holds_wanted(d):
    try:
        return (srv.one("SELECT count(*) FROM sync.wanted(%s)", (d,))
                == srv.one("SELECT count(*) FROM sync.held WHERE replica = %s AND taken IS NULL", (d,))
                and one(d, "SELECT count(*) FROM issue", engine=False) == srv.one(
                    'SELECT count(*) FROM issue WHERE "projectID" = ' + pid(PARTITION[d])))
    except sqlite3.Error:
        return False   # no tables yet


for d in (A, B):
    check(f"device {d[-1]} is provisioned by its agent", wait_for(DEADLINE, lambda: holds_wanted(d)), True)
    # a SELECT that writes cannot wait for the agent's write (a read turned write): tried again
    check(f"device {d[-1]}'s digest_interval set", wait_for(DEADLINE, lambda: configured(d)), True)


def state(d):
    return srv.one("SELECT state::text FROM sync.listing() WHERE replica = %s", (d,))


def digested(d):
    return srv.one("SELECT digests_at FROM sync.replicas WHERE id = %s", (d,))


check("both digests are compared and match", wait_for(DEADLINE, lambda: all(digested(d) for d in (A, B))), True)
say("the devices provisioned, their digests matching")

# ---- the refused delete: B deletes a comment the web app wrote ------------------------
victim = srv.one("""SELECT min(c.id) FROM comment c JOIN issue i ON i.id = c."issueID"
                     WHERE i."projectID" = """ + pid("replicache"))
has = 'SELECT count(*) FROM comment WHERE "deviceID" = ? AND id = ?'
# a note answered is let go of, or set aside when refused (sends.c)
pending = "SELECT count(*) FROM _sync_notes WHERE tbl = 'comment' AND set_aside IS NULL"
rows_b = one(B, "SELECT count(*) FROM comment")
db = opened(B)
db.execute('DELETE FROM comment WHERE "deviceID" = ? AND id = ?', (WEB, victim))
db.close()
check("B's file takes the delete", one(B, has, (WEB, victim)), 0)
# filed once its note is answered; the row back after that
filed_at = back_at = None
caught_up_short = 0
matched_short = set()   # the digests recorded as matching while it was short
deleted_at = time.monotonic()
filed_digest = None
while time.monotonic() - deleted_at < DEADLINE:
    # read the file, then the server, then the file: a state read between two
    # reads that both find the delete filed and the row missing is of a short B
    filed = one(B, pending) == 0
    seen, at = state(B), digested(B)
    short = one(B, has, (WEB, victim)) == 0
    if filed and filed_at is None:
        filed_at, filed_digest = time.monotonic(), at
    if filed_at is not None and filed and short:
        caught_up_short += seen == "caught_up"
        if at != filed_digest:
            matched_short.add(at)
    if not short and filed_at is not None:
        back_at = time.monotonic()
        break
    time.sleep(0.1)
check("the server refused B's delete", srv.one('SELECT count(*) FROM comment WHERE "deviceID" = %s AND id = %s',
                                                (WEB, victim)), 1)
check("B's agent was told", wait_for(DEADLINE, lambda: any(
    e.get("event") == "refused" and e.get("key") == [WEB, victim] for e in events[B])), True)
if back_at is None:
    print("drift: B's state", state(B), "its held row", srv.rows(
        "SELECT h.number, h.note, h.replace, h.refused, h.taken FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
        " WHERE h.replica = %s AND t.name = 'comment' AND h.key = sync.key(ARRAY[%s, %s])", (B, WEB, victim)),
        "health", srv.rows("SELECT kind, count, reason FROM sync.health() WHERE replica = %s", (B,)),
        "file refused", one(B, "SELECT count(*) FROM _sync_refused", engine=False), flush=True)
    for e in events[B]:
        if e.get("event") != "round" or any(e.get(k) for k in ("messages", "rows", "deletes", "refused", "narrowed", "server_refused", "snapshots")):
            print("drift: B", {k: v for k, v in e.items() if v not in (0, None, False)}, flush=True)
check("B holds the row again", back_at is not None, True)
check("before its digest was recorded as matching while short (within one digest round)", len(matched_short), 0)
check("no read of B's state said caught_up while it was short", caught_up_short, 0)
check("B holds as many comments as before", one(B, "SELECT count(*) FROM comment"), rows_b)
if back_at is not None:
    say(f"the refused delete: filed {filed_at - deleted_at:.1f} s after it was made, the row back"
        f" {back_at - filed_at:.1f} s later (digest_interval {DIGEST} s)")
check("B's delete stays set aside in its file, told as refused", (state(B), one(B, "SELECT count(*) FROM _sync_notes"
                                                                         " WHERE set_aside IS NOT NULL")), ("writes_refused", 1))

# ---- a value corrupted in A's file, behind the engine's back ---------------------------
target, title = srv.rows('SELECT id, title FROM issue WHERE "projectID" = ' + pid("zero") + " ORDER BY id LIMIT 1")[0]
held_issues = one(A, "SELECT count(*) FROM issue", engine=False)
check("A waits for nothing", wait_for(DEADLINE, lambda: state(A) == "caught_up"), True)
seen_events = len(events[A])
db = opened(A, engine=False)   # plain sqlite3: no extension, its triggers out of the way
db.execute("BEGIN")
triggers = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'issue'").fetchall()
for name, _ in triggers:
    db.execute(f'DROP TRIGGER "{name}"')
db.execute("UPDATE issue SET title = 'corrupted' WHERE id = ?", (target,))
for _, made in triggers:
    db.execute(made)
db.execute("COMMIT")
db.close()
check("the corruption left no note", one(A, "SELECT count(*) FROM _sync_notes", engine=False), 0)
corrupted_at = time.monotonic()
check("A's file holds the server's title again",
      wait_for(DEADLINE, lambda: one(A, "SELECT title FROM issue WHERE id = ?", (target,), engine=False) == title), True)
repaired_in = time.monotonic() - corrupted_at
# the rows that came down for it: the rounds' upserts since the corruption, once A is caught up
wait_for(DEADLINE, lambda: state(A) == "caught_up")
time.sleep(2)
rounds = [e for e in events[A][seen_events:] if e.get("event") == "round"]
sent = sum(e.get("rows", 0) for e in rounds)
# narrowed down by ranges of values hashes: the row, not the table A holds (400 rows at the default scale)
check("rows came down for it: the corrupted row, not the table", 1 <= sent <= min(5, held_issues), True)
check("and no snapshot", sum(e.get("snapshots", 0) for e in rounds), 0)
print(f"drift values: {sent} rows sent to repair one corrupted value of {held_issues} issues A holds"
      f" (repaired in {repaired_in:.1f} s, digest_interval {DIGEST} s)", flush=True)
check("the server's issue is untouched", srv.one("SELECT title FROM issue WHERE id = %s", (target,)), title)

for d in (A, B):
    agents[d].terminate()
    agents[d].wait(timeout=30)
say("done")
finish()
