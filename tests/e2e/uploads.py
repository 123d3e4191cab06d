#!/usr/bin/python3
"""uploads.py - nothing lost on the way up (issue 19 items 1, 2, 4, 5, 10, 13;
issue 13 hole 6), each as the scenario that failed, with real SQLite replicas:

  - an upload is whole or refused: no prefix of one is filed, no upload with
    a flipped bit is filed, and the whole afterwards is (not a duplicate);
    the Filed answer says per table how many rows it filed;
  - a replay is never taken for new: an old upload filed again after its
    answer was pruned is a duplicate, and stock.counted stays as it is;
  - a replica's own writes are never deleted from it while they are not
    filed: a timesheet the server keeps in its inbox survives the snapshot an
    unrelated declaration causes, and the reads say where it is;
  - honest answers: a record edited without raising its version is dropped,
    with the reason, on both sides;
  - one key per row: an upper-case uuid and "0950" are filed under the keys
    the server's types print;
  - sync_upload() on a replica that has applied nothing returns NULL;
  - memory while filing a 16 MiB upload of empty rows stays within a small
    multiple of upload_bytes (the backend's peak RSS, from /proc).

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import shutil
import sqlite3
import tempfile

import psycopg2

import wire
from harness import EXTENSION, Replica, Server, check, finish, settle

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"
tmp = tempfile.mkdtemp()

srv = Server("uploads")
srv.exec("""
CREATE TABLE projects (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE timesheets (worker uuid, id int, project bigint REFERENCES projects, hours int NOT NULL,
                         note text, v bigint NOT NULL, PRIMARY KEY (worker, id));
CREATE TABLE stock (store uuid, product bigint, qty int NOT NULL, counted int, PRIMARY KEY (store, product));
CREATE TABLE visits (store uuid, id bigint, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('projects', 'catalog', 'broadcast');
SELECT sync.mirror('timesheets', 'record', origin => 'worker', version => 'v');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('visits', 'record', origin => 'store');
INSERT INTO projects VALUES (1, 'roof'), (2, 'cellar');
""")
srv.exec("INSERT INTO stock VALUES (%s, 1, 10, NULL), (%s, 1, 5, NULL)", (S1, S2))
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.exec("SELECT sync.replica_add(%s)", (S2,))


def error_of(f, *args):
    """the SQLSTATE f raises, or None"""
    try:
        f(*args)
        return None
    except psycopg2.Error as e:
        return e.pgcode


def message_of(f, *args):
    """the primary message f raises, or None"""
    try:
        f(*args)
        return None
    except psycopg2.Error as e:
        return e.diag.message_primary


def snapshots(replica):
    return srv.one("SELECT snapshot_number FROM sync.replicas WHERE id = %s", (replica,))


def answers(replica):
    return srv.one("SELECT count(*) FROM sync.answers WHERE replica = %s", (replica,))


def progress(r, table):
    return json.loads(r.one("SELECT sync_progress()")).get(table, {})


def health(kind):
    return srv.rows("SELECT replica::text, tab::text, count, reason FROM sync.health() WHERE kind = %s", (kind,))


def open_plain(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    return db


# --- 19.13: a replica that has applied nothing has nothing to say ------------
fresh = open_plain(os.path.join(tmp, "fresh.db"))
try:
    said = fresh.execute("SELECT sync_upload()").fetchone()[0]
except sqlite3.Error as e:
    said = f"error: {e}"
check("19.13 sync_upload() on a replica that knows nothing returns NULL", said, None)
fresh.close()

r1 = Replica(srv, S1, os.path.join(tmp, "s1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "s2.db"))
settle(srv, [r1, r2])
check("both replicas hold the projects", (r1.keys("projects", ["id"]), r2.keys("projects", ["id"])),
      ({"1:1", "1:2"}, {"1:1", "1:2"}))

# --- 19.1: an upload is whole or refused --------------------------------------
for i in (1, 2, 3):
    r1.q("INSERT INTO timesheets (worker, id, project, hours, v) VALUES (?, ?, 1, 8, 1)", (S1, i))
up = bytes(r1.one("SELECT sync_upload()"))
before = (answers(S1), snapshots(S1))
filed_parts = []
codes = set()
for n in range(1, len(up)):
    code = error_of(srv.file, S1, up[:n])
    if code is None:
        filed_parts.append(n)
    else:
        codes.add(code)
check("19.1 no prefix of an upload is filed (the first 38 bytes were filed as 0 rows)", filed_parts[:5], [])
check("19.1 each prefix is refused as bytes damaged on the way", codes, {"22P03"})
check("19.1 and no answer is queued for any", (answers(S1), snapshots(S1)), before)
check("19.1 nothing of it is on the server", srv.one("SELECT count(*) FROM timesheets"), 0)
filed = srv.file(S1, up)
check("19.1 the whole upload afterwards is filed, not called a duplicate", (filed.get("filed"), filed.get("duplicate")),
      (3, None))
answer = [srv.one("SELECT sync.inspect(%s)", (m[0],)) for m in
          srv.rows("SELECT message FROM sync.answers WHERE replica = %s ORDER BY filed", (S1,))]
check("19.1 the Filed answer says how many rows of each table it filed",
      [t for a in answer for t in a["filed"].get("tables", [])][-1:],
      [{"table": "timesheets", "filed": 3, "refused": 0, "dropped": 0, "waiting": 0, "set_aside": 0}])
settle(srv, [r1, r2])
r1.q("UPDATE _sync_state SET digest_due = 1")
settle(srv, [r1, r2])
check("19.1 the replica keeps its three rows", r1.one("SELECT count(*) FROM timesheets"), 3)
check("19.1 and the server has them", srv.one("SELECT count(*) FROM timesheets"), 3)
check("19.1 and it is not provisioned again", snapshots(S1), before[1])

# bit flips in an upload: none is filed, the row keeps its value
r1.q("UPDATE timesheets SET hours = 9, v = 2 WHERE id = 1")
up = bytes(r1.one("SELECT sync_upload()"))
flipped_filed = 0
for i in range(len(up)):
    damaged = bytearray(up)
    damaged[i] ^= 1 << (i % 8)
    if error_of(srv.file, S1, bytes(damaged)) is None:
        flipped_filed += 1
check("19.1 no upload with a bit flipped is filed", flipped_filed, 0)
check("19.1 the row is as it was", srv.rows("SELECT hours, v FROM timesheets WHERE id = 1"), [(8, 1)])
check("19.1 the upload as it was made is filed", srv.file(S1, up).get("filed"), 1)
check("19.1 with its value", srv.rows("SELECT hours, v FROM timesheets WHERE id = 1"), [(9, 2)])
check("19.1 an upload without its length and check (as a library older than the server's sends) is refused"
      " as of an older library (0A000), not as damage",
      error_of(srv.file, S1, wire.up(S1, check=False)), "0A000")
check("19.1 an upload of an older library says so, and what to do", message_of(srv.file, S1, wire.up(S1, check=False)),
      "the upload is of a replica library older than this server's")
settle(srv, [r1, r2])

# --- 19.2: a replay is never taken for new -----------------------------------
r1.q("UPDATE stock SET counted = 10 WHERE product = 1")
old = bytes(r1.one("SELECT sync_upload()"))
srv.file(S1, old)
settle(srv, [r1])
r1.q("UPDATE stock SET counted = 20 WHERE product = 1")
r1.upload()
settle(srv, [r1])
check("19.2 the store counted 20", srv.one("SELECT counted FROM stock WHERE store = %s", (S1,)), 20)
check("19.2 a replay while its answer is kept is a duplicate", srv.file(S1, old).get("duplicate"), True)
srv.exec("UPDATE sync.answers SET pulled = now() - interval '2 hours'")
srv.one("SELECT answers FROM sync.prune()")
check("19.2 the answers are pruned", answers(S1), 0)
replayed = srv.file(S1, old)
check("19.2 an old upload replayed after its answer was pruned is a duplicate", replayed.get("duplicate"), True)
check("19.2 and stock.counted is not reverted", srv.one("SELECT counted FROM stock WHERE store = %s", (S1,)), 20)
settle(srv, [r1])
check("19.2 the store and the server agree", (r1.one("SELECT counted FROM stock WHERE product = 1"),
                                              srv.one("SELECT counted FROM stock WHERE store = %s", (S1,))), (20, 20))
# a send numbered at or below the last filed is a duplicate, whatever its send id
srv.file(S1, wire.up(S1, seq=wire.now_seq() + 10 ** 12))      # as from a file restored, or a clock ahead
r1.q("UPDATE stock SET counted = 21 WHERE product = 1")
check("19.2 a send numbered below the last filed is a duplicate", r1.upload().get("duplicate"), True)
settle(srv, [r1])
check("19.2 its replica hears so and numbers beyond: its row is filed",
      srv.one("SELECT counted FROM stock WHERE store = %s", (S1,)), 21)
# a file restored from an older copy numbers its sends beyond what it sent before
r1.close()
shutil.copy(os.path.join(tmp, "s1.db"), os.path.join(tmp, "s1.old"))
r1.open()
r1.q("INSERT INTO timesheets (worker, id, project, hours, v) VALUES (?, 4, 1, 8, 1)", (S1,))
settle(srv, [r1])
r1.close()
shutil.copy(os.path.join(tmp, "s1.old"), os.path.join(tmp, "s1.db"))
r1.open()
settle(srv, [r1])
# it applied what it had acknowledged: only its digests say it lacks its row (the backstop)
r1.q("UPDATE _sync_state SET digest_due = 1")
settle(srv, [r1])
check("19.2 a restored file is repaired and gets its row back",
      r1.one("SELECT count(*) FROM timesheets WHERE id = 4"), 1)
r1.q("INSERT INTO timesheets (worker, id, project, hours, v) VALUES (?, 7, 1, 8, 1)", (S1,))
settle(srv, [r1])
check("19.2 and what it writes afterwards is filed, never taken for a replay",
      srv.one("SELECT count(*) FROM timesheets WHERE worker = %s AND id = 7", (S1,)), 1)

# --- 19.4: a replica's own writes are never deleted while they are not filed ---
settle(srv, [r1, r2])
r1.q("INSERT INTO timesheets (worker, id, project, hours, v) VALUES (?, 5, 1, NULL, 1)", (S1,))
# a row only the server's own rule refuses (a CHECK the replica does not carry;
# a foreign key to a row it does not hold is refused by its own file, reach.py)
srv.exec("ALTER TABLE timesheets ADD CONSTRAINT timesheets_day CHECK (hours <= 24)")
r1.q("INSERT INTO timesheets (worker, id, project, hours, v) VALUES (?, 6, 1, 40, 1)", (S1,))
filed = r1.upload()
check("19.4 the server keeps both in its inbox (NOT NULL, CHECK)", filed.get("set_aside"), 2)
r1.sync()
check("19.4 the replica still has them", r1.one("SELECT count(*) FROM timesheets WHERE id IN (5, 6)"), 2)
check("19.4 sync_progress() says they wait in the server's inbox", progress(r1, "timesheets").get("waiting"), 2)
srv.exec("CREATE TABLE promos (id int PRIMARY KEY, text text NOT NULL)")
srv.exec("SELECT sync.mirror('promos', 'catalog', 'broadcast')")
settle(srv, [r1, r2])
# a snapshot, whatever starts it (an operator here), ends by deleting what it did not name
before_19_4 = snapshots(S1)
srv.exec("SELECT sync.replica_reprovision(%s)", (S1,))
settle(srv, [r1, r2])
check("19.4 the replica is provisioned again", snapshots(S1) != before_19_4, True)
check("19.4 and its snapshot's end keeps both timesheets", r1.one("SELECT count(*) FROM timesheets WHERE id IN (5, 6)"), 2)
check("19.4 sync_progress() still says they wait", progress(r1, "timesheets").get("waiting"), 2)
where = srv.rows("SELECT answer, reason FROM sync.row_progress('timesheets', %s) WHERE replica = %s", ([S1, "5"], S1))
check("19.4 sync.row_progress says it is set aside, and why (never holds)",
      [(a, "hours" in (why or "")) for a, why in where], [("set aside", True)])
srv.exec("ALTER TABLE timesheets ALTER hours DROP NOT NULL")
srv.exec("ALTER TABLE timesheets DROP CONSTRAINT timesheets_day")
srv.exec("UPDATE sync.inbox SET last_at = now() - interval '1 day'")
check("19.4 after the fixes the inbox files them", srv.one("SELECT sync.inbox_retry()"), 2)
where = srv.rows("SELECT answer FROM sync.row_progress('timesheets', %s) WHERE replica = %s", ([S1, "5"], S1))
check("19.4 now it holds it, and so does the device",
      (where, r1.one("SELECT count(*) FROM timesheets WHERE id = 5")), ([("holds",)], 1))
r1.one("SELECT sync_retry()")
settle(srv, [r1, r2])
check("19.4 the replica's notes are let go once their rows are filed", progress(r1, "timesheets"),
      {"unsent": 0, "unfiled": 0, "set_aside": 0, "refused": 0, "waiting": 0, "dropped": 0})
check("19.4 and the rows stay", r1.one("SELECT count(*) FROM timesheets WHERE id IN (5, 6)"), 2)

# --- 19.5: honest answers --------------------------------------------------
r1.q("UPDATE timesheets SET hours = 12 WHERE id = 2")   # v stays 1
filed = r1.upload()
check("19.5 an edit without raising its version is dropped, not filed", (filed.get("filed"), filed.get("dropped")),
      (0, 1))
check("19.5 sync.file says why", any("version" in why for why in filed.get("reasons", {}).get("dropped", [])), True)
r1.sync()
p = progress(r1, "timesheets")
check("19.5 sync_progress() says it was dropped, and why",
      (p.get("dropped"), any("version" in why for why in p.get("dropped_reasons", []))), (1, True))
check("19.5 sync.health says so, as waiting on a fix",
      [(rep, tab, n, "version" in why) for rep, tab, n, why in health("uploads dropped")],
      [(S1, "timesheets", 1, True)])
settle(srv, [r1])
check("19.5 the replica takes the server's version back", r1.one("SELECT hours FROM timesheets WHERE id = 2"), 8)
r1.q("UPDATE timesheets SET hours = 13, v = 2 WHERE id = 2")
filed = r1.upload()
check("19.5 raising the version files it", (filed.get("filed"), filed.get("dropped")), (1, 0))
r1.sync()
check("19.5 and what was dropped is forgotten on both sides",
      (progress(r1, "timesheets").get("dropped"), health("uploads dropped")), (0, []))
# a record kept as first filed: a different copy is dropped, the same one filed
r1.q("INSERT INTO visits (store, id, note) VALUES (?, 1, 'first')", (S1,))
r1.upload()
r1.q("UPDATE visits SET note = 'second' WHERE id = 1")
filed = r1.upload()
check("19.5 a record kept as first filed drops another copy", (filed.get("filed"), filed.get("dropped")), (0, 1))
settle(srv, [r1])
crafted = wire.up(S1, tables=[wire.rows("visits", upserts=[((S1, 1), json.dumps({"store": S1, "id": 1, "note": "first"}))])],
                  seq=r1.take_seq())
filed = srv.file(S1, crafted)
check("19.5 the same copy again is filed", (filed.get("filed"), filed.get("dropped")), (1, 0))
settle(srv, [r1, r2])

# --- 19.10: one key per row ---------------------------------------------------
r1.q("INSERT INTO visits (store, id, note) VALUES (?, 20, 'upper')", (S1.upper(),))
filed = r1.upload()
check("19.10 a record keyed by an upper-case uuid is filed", filed.get("filed"), 1)
held = srv.rows("SELECT h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                " WHERE t.name = 'visits' AND h.replica = %s AND h.key LIKE '%%2:20'", (S1,))
check("19.10 under the key the server's uuid prints", held, [(f"36:{S1}2:20",)])
before = snapshots(S1)
settle(srv, [r1])
r1.q("UPDATE _sync_state SET digest_due = 1")
settle(srv, [r1])
check("19.10 the digests agree: the replica is not provisioned again", snapshots(S1), before)
srv.exec("UPDATE visits SET note = 'from the office' WHERE id = 20")
settle(srv, [r1])
check("19.10 the server's change reaches the one row the replica has",
      r1.q("SELECT store, note FROM visits WHERE id = 20"), [(S1, "from the office")])
# uploads crafted in the replica's name: "0950" for 950, an upper-case uuid
crafted = wire.up(S1, tables=[wire.rows("visits", upserts=[((S1, "0950"), json.dumps({"store": S1, "id": 950, "note": "n"}))])],
                  seq=r1.take_seq())
check("19.10 a key part 0950 of a bigint is filed", srv.file(S1, crafted).get("filed"), 1)
crafted = wire.up(S1, tables=[wire.rows("visits", upserts=[((S1.upper(), "950"), json.dumps({"store": S1, "id": 950, "note": "n"}))])],
                  seq=r1.take_seq())
check("19.10 and again as 950 with an upper-case uuid", srv.file(S1, crafted).get("filed"), 1)
held = srv.rows("SELECT h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                " WHERE t.name = 'visits' AND h.replica = %s AND h.key LIKE '%%950'", (S1,))
check("19.10 one held key for the row", held, [(f"36:{S1}3:950",)])


# --- issue 13 hole 6: memory while filing ------------------------------------
def peak_rss(conn):
    """the backend's peak resident set (kB), as /proc says it"""
    with conn.cursor() as c:
        c.execute("SELECT pg_backend_pid()")
        pid = c.fetchone()[0]
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def file_in_fresh_backend(body):
    """file an upload from a table (so the query text is small) in a backend of
    its own; its peak RSS before and after, and what happened"""
    srv.exec("DROP TABLE IF EXISTS big_upload; CREATE TABLE big_upload (b bytea)")
    srv.exec("INSERT INTO big_upload VALUES (%s)", (psycopg2.Binary(body),))
    conn = psycopg2.connect(dbname="uploads")
    conn.autocommit = True
    with conn.cursor() as c:
        c.execute("SET magic_sync.upload_bytes = '16MB'")
        c.execute("SET client_min_messages = error")
        c.execute("SELECT 1 FROM big_upload")
    start = peak_rss(conn)
    try:
        with conn.cursor() as c:
            c.execute("SELECT sync.file(%s, (SELECT b FROM big_upload))", (S1,))
            outcome = c.fetchone()[0]
    except psycopg2.Error as e:
        outcome = e.pgcode
    end = peak_rss(conn)
    conn.close()
    return start, end, outcome


limit = 16 << 20
n = (limit - 200) // 4
empty = wire.up(S1, tables=[b"\x0a\x06visits" + b"\x12\x00" * (n // 2) + b"\x1a\x00" * (n // 2)], seq=r1.take_seq())
start, end, outcome = file_in_fresh_backend(empty)
check("13.6 a 16 MiB upload of empty rows and keys is refused", outcome, "22P03")
check(f"13.6 and filing it grows the backend by at most 4 x upload_bytes (grew {(end - start) // 1024} MiB)",
      (end - start) * 1024 <= 4 * limit, True)
n = (limit - 200) // 7
empty = wire.up(S1, tables=[b"\x0a\x06visits" + b"\x12\x00" * n + b"\x1a\x03\x0a\x011" * n], seq=r1.take_seq())
start, end, outcome = file_in_fresh_backend(empty)
check("13.6 a 16 MiB upload of empty rows with keys: each row refused",
      outcome.get("refused") if isinstance(outcome, dict) else outcome, n)
check(f"13.6 and filing it grows the backend by at most 4 x upload_bytes (grew {(end - start) // 1024} MiB)",
      (end - start) * 1024 <= 4 * limit, True)
srv.exec("DROP TABLE big_upload")

finish()
