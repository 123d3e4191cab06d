#!/usr/bin/python3
"""Real schemas in real time (issue 37): one-row writes on a schema nobody here
wrote, through the relay worker and three real agents.  Not a test: prints
figures, their ratios and the targets they are judged by.

The schema is Rocicorp's zbugs (tests/e2e/realschema.sql says where it comes
from, what a magic_sync user adds to it, and which variant a build that
refuses a foreign key to a unique constraint gets; the first line printed
says which was declared).  At --scale 1 it holds about 1.7 x 10^5 rows:
projects with families of 20,000, 5,000, 1,000, 100, 10 and 1 issues, one
issue with 20,000 comments and one with a single comment, the others two
each, labels on every issue, view states and notifications.  Three devices
(replicas, each with an agent: magic_sync_agent --listen on a SQLite file)
are given projects through two teams; the first two hold the 20,000-issue
project.

Per table, W one-row writes on the server, each in its own transaction and
alone (the previous write's pass is over): an UPDATE of a row the devices
hold (issueLabel: an INSERT, then its DELETE); its time runs from before the
write until every device that holds the row (or its issue) shows it in its
file, polled every half millisecond.  The pass cost is the relay worker's
CPU time over the write (/proc/<pid>/schedstat), so it reads the same under
other load.  Issues and comments are written in a family of 20,000 siblings
and in a family of one.  Targets: p50 <= 20 ms for every table; each
table's pass <= 3x the cheapest table's; 20,000 siblings / 1 sibling <= 2.

A write the devices do not show within --timeout seconds is a "timeout":
the table's other writes are skipped and the bench waits (up to --drain s)
for the worker to finish before the next table.

  bench/realschema.py [--scale S] [--writes W] [--timeout T] [--drain D]
                      [--tables user,issue,...]
                      (defaults 1, 20, 30, 900, every table)

It starts its own throw-away cluster with the worker preloaded and
magic_sync.database set, holding the machine's lock (scripts/lib.sh), as
bench/latency.py does.
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "tests", "e2e", "realschema.sql")
DB = "realschema"


def option(name, default, kind):
    if name in sys.argv:
        i = sys.argv.index(name)
        return kind(sys.argv[i + 1])
    return default


SCALE = option("--scale", 1.0, float)
WRITES = option("--writes", 20, int)
TIMEOUT = option("--timeout", 30.0, float)
DRAIN = option("--drain", 900.0, float)
TABLES = option("--tables", None, lambda v: v.split(","))

if not os.environ.get("MS_BENCH_INSIDE"):
    here = os.path.abspath(__file__)
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o synchronous_commit=on'
         ' -o shared_buffers=256MB -o max_wal_size=4GB -o magic_sync.database=' + DB +
         ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', here] + sys.argv[1:], cwd=ROOT))

import psycopg2  # noqa: E402  (inside the cluster only)

DEVICES = ["dddddddd-0000-4000-8000-00000000000%d" % i for i in range(1, 4)]
WEB = "eeeeeeee-0000-4000-8000-000000000000"   # the web app's comments: no device
FAMILIES = [("big", 20000), ("large", 5000), ("medium", 1000), ("small", 100), ("tiny", 10), ("one", 1)]
# teams: the first (devices 1 and 2) is given the 20,000-issue project, the
# second (device 3) the 5,000; both the one-issue project; nobody the 1,000
TEAMS = {"a": (["big", "small", "one"], DEVICES[:2]), "b": (["large", "tiny", "one"], DEVICES[2:])}
PARTITIONS = ["big", "small", "large"]          # each device's project: it gets its labels


def scaled(n):
    return max(1, round(n * SCALE)) if n > 1 else n


MANY = f"{scaled(20000):,} siblings"            # the big family, as large as the scale makes it


def connect():
    c = psycopg2.connect(dbname=DB)
    c.autocommit = True
    return c


def wait(what, predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def one(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def pid_of(name):
    return f"left(md5('p{name}'), 21)"


def load(cur):
    """The rows: every id a nanoid-like text (21 characters of md5)."""
    users = max(10, round(2000 * SCALE))
    cur.execute("""INSERT INTO "user" (id, login, name, "githubID")
                   SELECT left(md5('u' || g), 21), 'login' || g, 'User ' || g, g FROM generate_series(1, %s) g""",
                (users,))
    first = 1
    for name, size in FAMILIES:
        n = scaled(size)
        cur.execute(f"""INSERT INTO project (id, name, "lowerCaseName") VALUES ({pid_of(name)}, %s, %s)""",
                    (name.title(), name))
        cur.execute(f"""INSERT INTO label (id, name, "projectID")
                        SELECT left(md5('l{name}' || k), 21), 'label ' || k, {pid_of(name)} FROM generate_series(0, 19) k""")
        cur.execute(f"""INSERT INTO issue (id, title, open, "projectID", "creatorID", "assigneeID", description)
                        SELECT left(md5('i' || g), 21), 'issue ' || g, g %% 3 <> 0, {pid_of(name)},
                               left(md5('u' || (1 + g %% %s)), 21),
                               CASE WHEN g %% 7 <> 0 THEN left(md5('u' || (1 + g * 7 %% %s)), 21) END,
                               'what happened in ' || g
                          FROM generate_series(%s, %s) g""", (users, users, first, first + n - 1))
        # one or two labels an issue
        cur.execute(f"""INSERT INTO "issueLabel"
                        SELECT left(md5('l{name}' || k), 21), left(md5('i' || g), 21), {pid_of(name)}
                          FROM generate_series(%s, %s) g,
                               LATERAL (VALUES (g %% 20), (CASE WHEN g %% 2 = 0 THEN (g + 7) %% 20 END)) v(k)
                         WHERE k IS NOT NULL""", (first, first + n - 1))
        first += n
    issues = first - 1
    big = one(cur, f"""SELECT min(id) FROM issue WHERE "projectID" = {pid_of("big")}""")
    solo = one(cur, f"""SELECT id FROM issue WHERE "projectID" = {pid_of("one")}""")
    # comments: 20,000 on one issue of the big project, one on the single
    # issue of the one-issue project, two on every other issue
    cur.execute("""INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")
                   SELECT left(md5('c' || g), 21), %s, g, 'one of many, ' || g, left(md5('u' || (1 + g %% %s)), 21), %s
                     FROM generate_series(1, %s) g""", (big, users, WEB, scaled(20000)))
    cur.execute("""INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")
                   VALUES ('only-comment-of-its-issue', %s, 1, 'alone', left(md5('u1'), 21), %s)""", (solo, WEB))
    cur.execute("""INSERT INTO comment (id, "issueID", created, body, "creatorID", "deviceID")
                   SELECT left(md5('d' || i.id || k), 21), i.id, k, 'said ' || k, i."creatorID", %s
                     FROM issue i, generate_series(1, 2) k WHERE i.id NOT IN (%s, %s)""", (WEB, big, solo))
    cur.execute("""INSERT INTO "viewState" SELECT left(md5('u' || (1 + g %% %s)), 21), left(md5('i' || g), 21), g
                     FROM generate_series(2, %s, 2) g""", (users, issues))
    cur.execute("""INSERT INTO "issueNotifications" ("userID", "issueID")
                   SELECT left(md5('u' || (1 + g %% %s)), 21), left(md5('i' || g), 21) FROM generate_series(1, %s, 2) g""",
                (users, issues))
    for team, (projects, devices) in TEAMS.items():
        cur.execute("INSERT INTO team VALUES (%s, %s)", (team, "team " + team))
        for p in projects:
            cur.execute(f"""INSERT INTO "teamProject" VALUES (%s, {pid_of(p)})""", (team,))
        for d in devices:
            cur.execute('INSERT INTO "teamDevice" VALUES (%s, %s)', (team, d))
    return big, solo


def setup():
    admin = psycopg2.connect(dbname="postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {DB}")
    admin.close()
    conn = connect()
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SET client_min_messages = warning")
    cur.execute(open(SCHEMA).read())
    variant = one(cur, "SELECT realschema_variant()")
    t = time.monotonic()
    big, solo = load(cur)
    cur.execute("VACUUM ANALYZE")
    counts = dict((t, one(cur, f'SELECT count(*) FROM {t}'))
                  for t in ['"user"', "project", "issue", "comment", "label", '"issueLabel"', '"viewState"',
                            '"issueNotifications"'])
    loaded = time.monotonic() - t
    print(f"  ... {sum(counts.values()):,} rows loaded in {loaded:.0f} s", flush=True)
    # the rows' notes, for no replica yet: the worker's passes only mark them
    # done; each replica added then is provisioned with its rows
    t = time.monotonic()
    cur.execute("SELECT sync.wake()")
    wait("the rows' notes", lambda: one(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), 3600)
    print(f"  ... their notes taken in {time.monotonic() - t:.0f} s", flush=True)
    t = time.monotonic()
    # in one transaction: one pass provisions the three
    cur.execute("SELECT sync.replica_add(d::uuid, left(md5('p' || p), 21)) FROM unnest(%s, %s) v(d, p)",
                (DEVICES, PARTITIONS))
    cur.execute("SELECT sync.wake()")
    wait("the devices' snapshots",
         lambda: one(cur, "SELECT NOT EXISTS (SELECT FROM sync.replicas WHERE provision)"
                          " AND NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"), 3600)
    planned = time.monotonic() - t
    print(f"  ... the devices' snapshots planned in {planned:.0f} s", flush=True)
    return conn, variant, counts, loaded, planned, big, solo


def worker_cpu(pid):
    """The relay worker's CPU time so far, in seconds (run time on a CPU, ns)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def q(name):
    return '"' + name + '"'


class Devices:
    """Each device's file, read-only, as the application on it would read it."""

    def __init__(self, paths):
        self.files = [sqlite3.connect(f"file:{p}?mode=ro", uri=True) for p in paths]

    def value(self, d, table, key_cols, key, col):
        where = " AND ".join(f"{q(c)} = ?" for c in key_cols)
        try:
            row = self.files[d].execute(f"SELECT {q(col)} FROM {q(table)} WHERE {where}", key).fetchone()
        except sqlite3.OperationalError:
            return None
        return row if row is None else row[0]

    def holding(self, table, key_cols, key):
        return [d for d in range(len(self.files)) if self.value(d, table, key_cols, key, key_cols[0]) is not None]


def probes(cur, big, solo):
    """Per table: (label, table, key columns, the rows written, how a write is made).
    A write returns (sql, args, the column, the value the devices must show, the
    key whose row shows it, the devices that must show it)."""
    def rows(sql, args=None):
        cur.execute(sql, args)
        return cur.fetchall()

    def update(table, col, values):
        def write(i, key, devices, key_cols):
            where = " AND ".join(f"{q(c)} = %s" for c in key_cols)
            v = values(i)
            return f"UPDATE {q(table)} SET {q(col)} = %s WHERE {where}", (v,) + tuple(key), col, v, key, devices
        return write

    big_project = one(cur, f"SELECT {pid_of('big')}")
    out = [
        ("user", "user", ["id"], rows('SELECT i."creatorID" FROM issue i WHERE i."projectID" = %s'
                                      ' GROUP BY 1 ORDER BY 1 LIMIT %s', (big_project, WRITES)),
         update("user", "name", lambda i: f"renamed {i}")),
        ("project", "project", ["id"], rows(f"SELECT {pid_of('big')} UNION ALL SELECT {pid_of('small')}"),
         update("project", "name", lambda i: f"Project {i}")),
        (f"issue ({MANY})", "issue", ["id"],
         rows('SELECT id FROM issue WHERE "projectID" = %s ORDER BY id LIMIT %s', (big_project, WRITES)),
         update("issue", "title", lambda i: f"title {i}")),
        ("issue (1 sibling)", "issue", ["id"], [(solo,)], update("issue", "title", lambda i: f"title {i}")),
        (f"comment ({MANY})", "comment", ["deviceID", "id"],
         rows('SELECT "deviceID"::text, id FROM comment WHERE "issueID" = %s ORDER BY id LIMIT %s', (big, WRITES)),
         update("comment", "body", lambda i: f"body {i}")),
        ("comment (1 sibling)", "comment", ["deviceID", "id"],
         rows('SELECT "deviceID"::text, id FROM comment WHERE "issueID" = %s', (solo,)),
         update("comment", "body", lambda i: f"body {i}")),
        ("label", "label", None, rows(f"SELECT id, \"projectID\" FROM label WHERE \"projectID\" = {pid_of('big')}"
                                      " ORDER BY id LIMIT %s", (WRITES,)),
         update("label", "name", lambda i: f"label {i}")),
        ("viewState", "viewState", ["userID", "issueID"],
         rows('SELECT v."userID", v."issueID" FROM "viewState" v JOIN issue i ON i.id = v."issueID"'
              ' WHERE i."projectID" = %s ORDER BY 2 LIMIT %s', (big_project, WRITES)),
         update("viewState", "viewed", lambda i: 10.0 ** 7 + i)),
        ("issueNotifications", "issueNotifications", ["userID", "issueID"],
         rows('SELECT v."userID", v."issueID" FROM "issueNotifications" v JOIN issue i ON i.id = v."issueID"'
              ' WHERE i."projectID" = %s ORDER BY 2 LIMIT %s', (big_project, WRITES)),
         update("issueNotifications", "created", lambda i: 10.0 ** 7 + i)),
    ]
    # issueLabel: a label put on an issue of the big project, then taken off
    issue = rows('SELECT id FROM issue WHERE "projectID" = %s ORDER BY id DESC LIMIT 1', (big_project,))[0][0]
    free = rows('SELECT l.id FROM label l WHERE l."projectID" = %s AND NOT EXISTS'
                ' (SELECT FROM "issueLabel" x WHERE x."labelID" = l.id AND x."issueID" = %s) ORDER BY 1 LIMIT 1',
                (big_project, issue))[0][0]

    def label_on_off(i, key, devices, key_cols):
        if i % 2 == 0:
            return ('INSERT INTO "issueLabel" VALUES (%s, %s, %s)', (free, issue, big_project), "labelID", free,
                    (free, issue), devices)
        return ('DELETE FROM "issueLabel" WHERE "labelID" = %s AND "issueID" = %s', (free, issue), "labelID", None,
                (free, issue), devices)
    out.append(("issueLabel (on, off)", "issueLabel", ["labelID", "issueID"], [(free, issue)], label_on_off))
    return out, issue


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    try:
        conn, variant, counts, loaded, planned, big, solo = setup()
    except SystemExit as e:
        print(f"stopped: {e}: no write was timed (scale {SCALE}, load average"
              f" {' '.join(f'{x:.2f}' for x in os.getloadavg())})", flush=True)
        raise
    cur = conn.cursor()
    tmp = tempfile.mkdtemp(prefix="ms_realschema_")
    paths = [os.path.join(tmp, f"device{i + 1}.db") for i in range(len(DEVICES))]
    agents = [subprocess.Popen([os.path.join(ROOT, "magic_sync_agent"), "--server", f"dbname={DB}",
                                "--listen", f"dbname={DB}", "--replica", d, "--db", p, "--quiet"])
              for d, p in zip(DEVICES, paths)]
    results = []
    try:
        t = time.monotonic()
        wait("the agents' snapshots",
             lambda: one(cur, "SELECT bool_and(acked_number = last_number AND last_number > 0) FROM sync.replicas"),
             3600)
        applied = time.monotonic() - t
        held = [one(cur, "SELECT count(*) FROM sync.held WHERE replica = %s", (d,)) for d in DEVICES]
        # as autovacuum would before long (bench/latency.py does the same): the
        # plan's estimates read sync.held's statistics
        cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.notes")
        worker = one(cur, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'")
        devices = Devices(paths)
        cur.execute("SELECT name, key::text[] FROM sync.mirrors")
        keys = dict(cur.fetchall())
        label_key = keys["label"]
        plan, _ = probes(cur, big, solo)
        for label, table, key_cols, rows, write in plan:
            if TABLES and table not in TABLES:
                continue
            key_cols = key_cols or label_key
            if table == "label":
                rows = [r if label_key == ["id", "projectID"] else r[:1] for r in rows]
            times, cpu, note = [], [], ""
            for i in range(WRITES):
                key = tuple(rows[i % len(rows)])
                shown_on = devices.holding(table, key_cols, key) if table != "issueLabel" else \
                    devices.holding("issue", ["id"], key[1:])
                sql, args, col, value, at, shown_on = write(i, key, shown_on, key_cols)
                if not shown_on:
                    note = "no device holds the rows written"
                    break
                time.sleep(0.2)     # each write alone: the previous one's pass and acknowledgement are over
                c0 = worker_cpu(worker)
                t = time.monotonic()
                cur.execute(sql, args)
                waiting = set(shown_on)
                while waiting:
                    for d in list(waiting):
                        if devices.value(d, table, key_cols if table != "issueLabel" else ["labelID", "issueID"],
                                         at, col) == value:
                            waiting.discard(d)
                    if waiting and time.monotonic() - t > TIMEOUT:
                        break
                    time.sleep(0.0005)
                if waiting:
                    note = f"timeout (> {TIMEOUT:.0f} s) at write {i + 1}"
                    d0 = time.monotonic()
                    try:
                        wait("the worker, after a timeout", lambda: one(
                            cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                                 " AND (SELECT bool_and(acked_number = last_number) FROM sync.replicas)"), DRAIN)
                    except SystemExit:
                        note += f"; the worker did not finish within {DRAIN:.0f} s more: the bench stops"
                        results.append((label, times, cpu, note))
                        raise
                    note += f"; it took {TIMEOUT + time.monotonic() - d0:.0f} s"
                    cpu.append(worker_cpu(worker) - c0)
                    break
                times.append(time.monotonic() - t)
                time.sleep(0.2)
                cpu.append(worker_cpu(worker) - c0)
            results.append((label, times, cpu, note))
            print(f"  ... {label}: {len(times)} writes{', ' + note if note else ''}", flush=True)
    except SystemExit as e:
        print(f"stopped: {e}", flush=True)
    finally:
        for a in agents:
            a.terminate()
        for a in agents:
            a.wait()
    report(variant, counts, loaded, planned, locals().get("applied"), locals().get("held"), results)


def report(variant, counts, loaded, planned, applied, held, results):
    load = os.getloadavg()
    total = sum(counts.values())
    print(f"realschema: Rocicorp's zbugs (rocicorp/mono apps/zbugs/db/drizzle-schema.ts), {variant}")
    print(f"  scale {SCALE}: {total:,} rows (" + ", ".join(f"{t.strip(chr(34))} {n:,}" for t, n in counts.items())
          + f"), loaded in {loaded:.0f} s")
    if held:
        print(f"  3 devices hold {', '.join(f'{h:,}' for h in held)} rows: planned in {planned:.0f} s,"
              f" applied by the agents in {applied:.0f} s")
    print(f"  {WRITES} one-row writes a table, the worker and 3 agents (--listen), load average"
          f" {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"  {'table':28} {'p50 ms':>8} {'p90 ms':>8} {'pass ms':>8} {'pass / cheapest':>16}")
    passes = {label: pct(cpu, 50) * 1000 for label, times, cpu, note in results if cpu}
    cheapest = min(passes.values()) if passes else None
    for label, times, cpu, note in results:
        p50 = f"{pct(times, 50) * 1000:8.1f}" if times else f"{'-':>8}"
        p90 = f"{pct(times, 90) * 1000:8.1f}" if times else f"{'-':>8}"
        ps = f"{passes[label]:8.1f}" if label in passes else f"{'-':>8}"
        ratio = f"{passes[label] / cheapest:16.2f}" if label in passes and cheapest else f"{'-':>16}"
        print(f"  {label:28} {p50} {p90} {ps} {ratio}" + (f"   {note}" if note else ""))
    print("  (latency: write until every device holding the row shows it; pass: the relay worker's CPU time)")
    slow = [label for label, times, cpu, note in results if not times or note or pct(times, 50) > 0.020]
    print(f"target p50 <= 20 ms for every table: {'met' if not slow else 'NOT met: ' + ', '.join(slow)}")
    dear = [label for label in passes if passes[label] > 3 * cheapest]
    print(f"target every table's pass <= 3x the cheapest's: {'met' if not dear and passes else 'NOT met: ' + ', '.join(dear)}")
    by = {label: (times, cpu, note) for label, times, cpu, note in results}
    for what in ("issue", "comment"):
        many, alone = by.get(f"{what} ({MANY})"), by.get(f"{what} (1 sibling)")
        if not many or not alone or not many[0] or not alone[0] or many[2] or alone[2]:
            print(f"target {what}: {MANY} / 1 sibling <= 2: NOT measured (a timeout)")
            continue
        lat = pct(many[0], 50) / pct(alone[0], 50)
        cost = pct(many[1], 50) / pct(alone[1], 50) if pct(alone[1], 50) > 0 else float("inf")
        print(f"target {what}: {MANY} / 1 sibling <= 2: latency {lat:.2f}, pass {cost:.2f}:"
              f" {'met' if lat <= 2 and cost <= 2 else 'NOT met'}"
              + (" (the target is for 20,000: --scale 1)" if SCALE != 1 else ""))


if __name__ == "__main__":
    main()
