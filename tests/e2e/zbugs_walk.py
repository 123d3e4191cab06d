#!/usr/bin/python3
"""zbugs_walk.py - issue 39's experiments again, on Rocicorp's zbugs schema
(tests/e2e/realschema.sql), with magic_sync_agent as a real process per
device and real SQLite files.  Kept apart from the suite: make check-long
runs it (tests/e2e/long.sh), tests/e2e/run does not unless named.

  Projects at the published sizes (ZBUGS_SCALE, default 1: zero 20,000
  issues, reflect 5,000, replicache 1,000; two comments an issue, labels,
  view states, notifications).  Teams: core (device A) and web (device C)
  hold zero; infra (device B) holds replicache; nobody holds reflect.

  - device B writes a comment on an issue of reflect, which it does not
    hold: its file refuses it at once; its owner takes the checks out and
    writes it anyway: the server refuses that row, and B receives nothing of
    reflect; it is told why in its agent's --json (`refused` events with
    table, key, reason, SQLSTATE), in sync_progress(), in sync.health() per
    replica, and in sync.overview()/sync.listing() (writes_refused, not
    caught_up);
  - one issue of reflect moved into zero, keeping its labels (of reflect:
    the declared variant of realschema.sql, which the walk declares; with
    ZBUGS_VARIANT=published the labels go first): sync.would_send says beforehand,
    per device, what the move sends and lets go of; the pass that then
    runs sends exactly that.  Then, for each of the two devices holding
    zero: sync.why_all explains every row it holds, from one walk; and
    sync.why, one call a row, explains the
    rows of the move (ZBUGS_WHY_ROWS of them, default 20, spread over
    them; 0: all).  Timed, printed as `zbugs why...` lines.

Run by tests/e2e/run zbugs_walk.py (inside pg_virtualenv)."""
import json
import os
import resource
import sqlite3
import subprocess
import tempfile
import time

from harness import EXTENSION, TOP, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
SCHEMA = os.path.join(TOP, "tests", "e2e", "realschema.sql")
SCALE = float(os.environ.get("ZBUGS_SCALE", "1"))
WHY_ROWS = int(os.environ.get("ZBUGS_WHY_ROWS", "20"))
A = "39390000-0000-4000-8000-00000000000a"
B = "39390000-0000-4000-8000-00000000000b"
C = "39390000-0000-4000-8000-00000000000c"
WEB = "eeeeeeee-0000-4000-8000-000000000000"   # comments written by the web app: no device
FAMILIES = [("zero", 20000), ("reflect", 5000), ("replicache", 1000)]
TEAMS = {"core": (["zero"], [A]), "web": (["zero"], [C]), "infra": (["replicache"], [B])}
PARTITION = {A: "zero", B: "replicache", C: "zero"}
DB = "zbugs"
tmp = tempfile.mkdtemp(prefix="zbugs.")
began = time.monotonic()


def pid(name):
    return f"left(md5('p{name}'), 21)"


def say(what):
    print(f"zbugs: {what} ({time.monotonic() - began:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)


srv = Server(DB)
srv.exec(open(SCHEMA).read())
# The move as the issue made it keeps the issue's labels, of its old project:
# only the declared variant allows that ("issueLabel" -> issue by "issueID"
# alone), so the walk declares it where the build took the published one;
# ZBUGS_VARIANT=published keeps that (the move then deletes the labels).
if os.environ.get("ZBUGS_VARIANT") != "published" and srv.one("SELECT realschema_variant()").startswith("as published"):
    srv.exec("""SELECT sync.unmirror('"issueLabel"'); SELECT sync.unmirror('label');
        ALTER TABLE "issueLabel" DROP CONSTRAINT "issueLabel_issueID_projectID_fkey",
            ADD CONSTRAINT "issueLabel_issueID_fkey" FOREIGN KEY ("issueID") REFERENCES issue ON DELETE CASCADE;
        SELECT sync.mirror('label', 'catalog', 'broadcast', key => '{id,projectID}', "partition" => 'projectID');
        SELECT sync.mirror('"issueLabel"', 'catalog', 'follows("issueID")');""")
variant = srv.one("SELECT realschema_variant()")
say(f"schema: {variant}")

# ---- the rows ------------------------------------------------------------------
users = max(10, round(2000 * SCALE))
srv.exec("""INSERT INTO "user" (id, login, name, "githubID")
            SELECT left(md5('u' || g), 21), 'login' || g, 'User ' || g, g FROM generate_series(1, %s) g""", (users,))
first = 1
for name, size in FAMILIES:
    n = max(1, round(size * SCALE))
    srv.exec(f"""INSERT INTO project (id, name, "lowerCaseName") VALUES ({pid(name)}, %s, %s)""", (name.title(), name))
    srv.exec(f"""INSERT INTO label (id, name, "projectID")
                 SELECT left(md5('l{name}' || k), 21), 'label ' || k, {pid(name)} FROM generate_series(0, 19) k""")
    srv.exec(f"""INSERT INTO issue (id, title, open, "projectID", "creatorID", description)
                 SELECT left(md5('i' || g), 21), 'issue ' || g, g %% 3 <> 0, {pid(name)},
                        left(md5('u' || (1 + g %% %s)), 21), 'what happened in ' || g
                   FROM generate_series(%s, %s) g""", (users, first, first + n - 1))
    srv.exec(f"""INSERT INTO "issueLabel"
                 SELECT left(md5('l{name}' || (g %% 20)), 21), left(md5('i' || g), 21), {pid(name)}
                   FROM generate_series(%s, %s) g""", (first, first + n - 1))
    first += n
issues = first - 1
srv.exec("""INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")
            SELECT left(md5('d' || i.id || k), 21), i.id, k, 'said ' || k, i."creatorID", %s
              FROM issue i, generate_series(1, 2) k""", (WEB,))
srv.exec("""INSERT INTO "viewState" SELECT left(md5('u' || (1 + g %% %s)), 21), left(md5('i' || g), 21), g
              FROM generate_series(2, %s, 2) g""", (users, issues))
srv.exec("""INSERT INTO "issueNotifications" ("userID", "issueID")
            SELECT left(md5('u' || (1 + g %% %s)), 21), left(md5('i' || g), 21) FROM generate_series(1, %s, 2) g""",
         (users, issues))
for team, (projects, devices) in TEAMS.items():
    srv.exec("INSERT INTO team VALUES (%s, %s)", (team, team))
    for p in projects:
        srv.exec(f"""INSERT INTO "teamProject" VALUES (%s, {pid(p)})""", (team,))
    for d in devices:
        srv.exec('INSERT INTO "teamDevice" VALUES (%s, %s)', (team, d))
rows = srv.one("SELECT sum(n_live_tup) FROM pg_stat_user_tables") or 0
# the rows' notes are for no replica (none is added yet): a pass would only mark them done
srv.exec("TRUNCATE sync.notes")
srv.exec("VACUUM ANALYZE")
for d in (A, B, C):
    srv.exec(f"SELECT sync.replica_add(%s, {pid(PARTITION[d])})", (d,))
say(f"{issues:,} issues loaded (scale {SCALE})")
paths = {d: os.path.join(tmp, f"{d[-1]}.db") for d in (A, B, C)}


def agent(d, *extra):
    p = subprocess.run([AGENT, "--server", f"dbname={DB}", "--replica", d, "--db", paths[d], "--once", *extra],
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        print(p.stdout[-2000:] + p.stderr[-2000:])
    return p


def settle(rounds=4):
    """passes by hand and each device's agent, until a round moves nothing"""
    for _ in range(rounds):
        did = srv.relay()
        for d in (A, B, C):
            agent(d)
        if did["notes_read"] == 0 and did["provisioned"] == 0 and did["messages"] == 0:
            return
    return


def opened(d):
    db = sqlite3.connect(paths[d], isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    return db


settle()
say("the devices provisioned")
reflect = srv.one(f"SELECT {pid('reflect')}")
zero = srv.one(f"SELECT {pid('zero')}")


def of_reflect(d):
    """the rows of project reflect in d's file: its project, issues, labels"""
    db = opened(d)
    try:
        return (db.execute("SELECT count(*) FROM project WHERE id = ?", (reflect,)).fetchone()[0]
                + db.execute('SELECT count(*) FROM issue WHERE "projectID" = ?', (reflect,)).fetchone()[0]
                + db.execute('SELECT count(*) FROM label WHERE "projectID" = ?', (reflect,)).fetchone()[0])
    finally:
        db.close()


for d in (A, B, C):
    check(f"device {d[-1]} holds what its rules give it, as the engine records",
          srv.one("""SELECT count(*) FROM sync.wanted(%s)""", (d,)),
          srv.one("SELECT count(*) FROM sync.held WHERE replica = %s AND taken IS NULL", (d,)))
check("B holds nothing of reflect", of_reflect(B), 0)

# ---- B writes on an issue of a project it was never given ------------------------
target = srv.one('SELECT min(id) FROM issue WHERE "projectID" = %s', (reflect,))
db = opened(B)
try:
    db.execute('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID", hlc)'
               " VALUES ('b-foreign', ?, 1, 'let me in', NULL, ?, 0)", (target, B))
    said = None
except sqlite3.Error as e:
    said = str(e)
check("B's file refuses the comment at once, naming the table, the column and the issue",
      said is not None and all(w in said for w in ("comment", "issueID", "issue")), True)
# the file is its owner's: the checks can be taken out, and the comment written
for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name GLOB '_sync_fk_*'").fetchall():
    db.execute(f'DROP TRIGGER "{name}"')
db.execute('INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID", hlc)'
           " VALUES ('b-foreign', ?, 1, 'let me in', NULL, ?, 0)", (target, B))
db.close()
p = agent(B, "--json")
events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
refused = [e for e in events if e.get("event") == "refused"]
check("B's agent says one refused event: table, key, reason, SQLSTATE",
      [(e.get("table"), e.get("key"), "42501" == e.get("sqlstate"), "issueID" in (e.get("reason") or ""))
       for e in refused], [("comment", [B, "b-foreign"], True, True)])
reason = refused[0].get("reason") if refused else None
print(f"zbugs: B is told: {reason}")
settle()
check("B received nothing of reflect", of_reflect(B), 0)
check("nor does the engine record it holding any",
      srv.one("""SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab
                  WHERE h.replica = %s AND h.taken IS NULL AND
                        (t.name = 'project' AND h.key = sync.key(ARRAY[%s])
                         OR t.name = 'issue' AND h.key IN (SELECT sync.key(ARRAY[id]) FROM issue
                                                             WHERE "projectID" = %s))""", (B, reflect, reflect)), 0)
check("the comment is not filed", srv.one("SELECT count(*) FROM comment WHERE id = 'b-foreign'"), 0)
db = opened(B)
aside = json.loads(db.execute("SELECT sync_progress() -> '$.comment.set_aside_rows'").fetchone()[0] or "null")
db.close()
check("sync_progress() lists it with its key and SQLSTATE",
      [(x["key"], x["sqlstate"], "issueID" in x.get("reason", "")) for x in aside or []],
      [([B, "b-foreign"], "42501", True)])
health = srv.rows("SELECT kind, count, reason, sqlstate FROM sync.health() WHERE replica = %s"
                  " AND kind = 'writes refused'", (B,))
check("sync.health() says it for B, with reason and SQLSTATE",
      [(k, n, "issueID" in (r or ""), s) for k, n, r, s in health], [("writes refused", 1, True, "42501")])
check("sync.listing(): B is writes_refused, not caught_up",
      srv.one("SELECT state::text FROM sync.listing() WHERE replica = %s", (B,)), "writes_refused")
check("sync.overview() counts it as a state of its own",
      srv.one("SELECT (sync.overview() -> 'states' ->> 'writes_refused')::int"), 1)
check("A and C are not", srv.rows("SELECT count(*) FROM sync.listing() WHERE replica IN (%s, %s)"
                                  " AND state::text = 'writes_refused'", (A, C)), [(0,)])

# ---- one issue of reflect moved into zero ------------------------------------------
mover = srv.one('SELECT max(id) FROM issue WHERE "projectID" = %s', (reflect,))
if "declared variant" in variant:
    move = f"""UPDATE issue SET "projectID" = '{zero}' WHERE id = '{mover}'"""
else:
    # as published, "issueLabel" names the issue's project: its labels go with the move
    move = (f"""WITH gone AS (DELETE FROM "issueLabel" WHERE "issueID" = '{mover}')"""
            f""" UPDATE issue SET "projectID" = '{zero}' WHERE id = '{mover}'""")
t = time.monotonic()
said = {(r, tab): (s, g) for r, tab, s, g in srv.rows("SELECT replica::text, tab::text, sent, let_go"
                                                     " FROM sync.would_send(%s)", (move,))}
ws_s = time.monotonic() - t
for d in (A, B, C):
    print(f"zbugs would_send {d[-1]}: " + ", ".join(f"{tab} +{s} -{g}" for (r, tab), (s, g) in sorted(said.items())
                                                   if r == d), flush=True)
check("sync.would_send changed nothing", srv.one('SELECT "projectID" FROM issue WHERE id = %s', (mover,)), reflect)
check("and noted nothing", srv.one("SELECT count(*) FROM sync.notes WHERE NOT done"), 0)
before = dict(srv.rows("SELECT id::text, last_number FROM sync.replicas"))
srv.exec(move)
did = srv.relay()
total_sent = sum(s for s, _ in said.values())
total_let_go = sum(g for _, g in said.values())
check("the pass sent what sync.would_send said", (did["rows_sent"], did["rows_taken"]), (total_sent, total_let_go))
for d in (A, C):
    check(f"device {d[-1]} is sent what would_send said, per table",
          sorted((tab, n) for tab, n in srv.rows(
              "SELECT t.relid::regclass::text, count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
              " WHERE h.replica = %s AND h.number > %s AND h.taken IS NULL GROUP BY 1", (d, before[d]))),
          sorted((tab, s) for (r, tab), (s, _) in said.items() if r == d and s > 0))
moved = {d: sum(s for (r, _), (s, _) in said.items() if r == d) for d in (A, C)}
say(f"the move sends {moved[A]:,} rows to A, {moved[C]:,} to C (would_send took {ws_s * 1000:.0f} ms)")
settle()
for d in (A, B, C):
    check(f"device {d[-1]} holds what its rules give it after the move",
          srv.one("SELECT count(*) FROM sync.wanted(%s)", (d,)),
          srv.one("SELECT count(*) FROM sync.held WHERE replica = %s AND taken IS NULL", (d,)))
check("B still holds nothing of reflect", of_reflect(B), 0)

# ---- why each device holds every row it holds ----------------------------------------


def server_cpu():
    """this connection's backend's CPU time so far, in seconds (/proc/<pid>/stat: utime + stime)"""
    f = open(f"/proc/{srv.one('SELECT pg_backend_pid()')}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def explained(chain):
    """a chain from a rule's row, every link wanted, depths 0, 1, ..."""
    return (bool(chain) and all(w for _, _, w in chain) and (chain[0][1] or "").startswith("rule: ")
            and [x for x, _, _ in chain] == list(range(len(chain))))


for d in (A, C):
    held = srv.one("SELECT count(*) FROM sync.held WHERE replica = %s AND taken IS NULL", (d,))
    # every row it holds, in one walk of its wanted set: sync.why_all
    c0, t = server_cpu(), time.monotonic()
    links = srv.rows("SELECT tab::text, key, depth, relation FROM sync.why_all(%s)", (d,))
    wall, cpu = time.monotonic() - t, server_cpu() - c0
    check(f"sync.why_all explains every row {d[-1]} holds: one line each, a link from a rule",
          (len(links), sum(1 for _, _, depth, _ in links if depth is None)), (held, 0))
    moved_keys = set(srv.rows(
        "SELECT t.relid::regclass::text, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
        " WHERE h.replica = %s AND h.number > %s AND h.taken IS NULL", (d, before[d])))
    check(f"the rows the move sent {d[-1]} among them", moved_keys <= {(tab, k) for tab, k, _, _ in links}, True)
    print(f"zbugs why_all {d[-1]}: every row it holds, {held:,}, in {wall:.1f} s; server CPU {cpu:.1f} s,"
          f" {cpu / max(1, held) * 1e6:.0f} us a row (scale {SCALE}, load {os.getloadavg()[0]:.1f})", flush=True)
    # the rows the move sent, one sync.why each (a sample spread over them with ZBUGS_WHY_ROWS)
    sent = sorted(moved_keys)
    if WHY_ROWS and len(sent) > WHY_ROWS:
        sent = sent[::(len(sent) + WHY_ROWS - 1) // WHY_ROWS]
    c0, t = server_cpu(), time.monotonic()
    unexplained = sum(not explained(srv.rows("SELECT depth, relation, wanted FROM sync.why(%s, %s, %s)"
                                             " ORDER BY depth", (d, tab, key))) for tab, key in sent)
    wall, cpu = time.monotonic() - t, server_cpu() - c0
    check(f"sync.why explains each row of the move to {d[-1]} it is asked about", (len(sent) > 0, unexplained), (True, 0))
    n = max(1, len(sent))
    print(f"zbugs why {d[-1]}: {len(sent):,} of the move's {len(moved_keys):,} rows, one sync.why each, in {wall:.1f} s,"
          f" {wall / n * 1000:.0f} ms a row; server CPU {cpu:.1f} s, {cpu / n * 1000:.0f} ms a row, so"
          f" {cpu / n * len(moved_keys):.0f} s for all of them (scale {SCALE}, load {os.getloadavg()[0]:.1f})", flush=True)
say(f"{rows:,} rows at scale {SCALE}; done; agent CPU (children) "
    f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.0f} s")
finish()
