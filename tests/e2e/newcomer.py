#!/usr/bin/python3
"""newcomer.py - what a new user met (issue 39), with magic_sync_agent as a
real process and real SQLite files:

  - the agent started before CREATE EXTENSION says so, with a hint, and
    exits 69 (retryable), not 70 ("retrying will not fix"); the file it
    made is not stamped;
  - an agent given a uuid the server does not know (a typo) is refused and
    leaves a new file unstamped: the right uuid works on it afterwards;
  - two agents on one file: the second is refused (exit 66), saying which
    process holds it; once the first ends, the file is free;
  - a record written in another replica's name is refused by the server:
    the agent's --json says a `refused` event with table, key, reason and
    SQLSTATE; its line says why; sync_progress() lists the row with its
    key; sync.health() says it per replica with reason and SQLSTATE; the
    replica is writes_refused in sync.overview and sync.listing, not
    caught_up; and when the row is written again, in its own name, it
    goes, and all of that ends.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import sqlite3
import subprocess
import tempfile
import time

from harness import EXTENSION, TOP, Server, check, finish, psql

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "71717171-0000-4000-8000-000000000001"
S2 = "71717171-0000-4000-8000-000000000002"
TYPO = "71717171-0000-4000-8000-00000000000f"
tmp = tempfile.mkdtemp(prefix="newcomer.")


def run(db, replica, path, *extra):
    return subprocess.run([AGENT, "--server", f"dbname={db}", "--replica", replica, "--db", path,
                           "--once", *extra], capture_output=True, text=True, timeout=120)


def stamp_of(path):
    """the uuid the file is stamped with (sync_status()'s replica), or None"""
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    try:
        return json.loads(db.execute("SELECT sync_status()").fetchone()[0]).get("replica")
    finally:
        db.close()


def opened(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXTENSION)
    return db


# --- before CREATE EXTENSION --------------------------------------------
psql("postgres", "DROP DATABASE IF EXISTS bare; CREATE DATABASE bare")
early = os.path.join(tmp, "early.db")
p = run("bare", S1, early)
check("an agent before CREATE EXTENSION exits 69 (retryable)", p.returncode, 69)
check("and says the database has no magic_sync yet, with a hint",
      "no magic_sync yet" in p.stderr and "CREATE EXTENSION magic_sync" in p.stderr, True)
check("not 'retrying will not fix'", "retrying will not fix" in p.stdout + p.stderr, False)
check("the file it made is not stamped", stamp_of(early), None)

srv = Server("newcomer")
srv.exec("""
CREATE TABLE notes (origin uuid NOT NULL, id int NOT NULL, body text, PRIMARY KEY (origin, id));
SELECT sync.mirror('notes', 'record', origin => 'origin');
""")
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))
srv.relay()

# --- a uuid the server does not know ------------------------------------
path1 = os.path.join(tmp, "1.db")
p = run("newcomer", TYPO, path1)
check("a uuid never registered is refused: exit 77", p.returncode, 77)
check("and the new file is not stamped with it", stamp_of(path1), None)
p = run("newcomer", S1, path1)
check("the right uuid then works on that file", p.returncode, 0)
check("which is now its", stamp_of(path1), S1)
p = run("newcomer", S2, path1)
check("another uuid on a stamped file: exit 66", p.returncode, 66)

# --- two agents on one file ---------------------------------------------
path2 = os.path.join(tmp, "2.db")
first = subprocess.Popen([AGENT, "--server", "dbname=newcomer", "--replica", S2, "--db", path2, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
started = first.stdout.readline()        # the start event: the file is open and locked
check("the first agent starts", '"event":"start"' in started, True)
p = run("newcomer", S2, path2)
check("a second agent on the same file: exit 66", p.returncode, 66)
check("saying which process works on it", f"pid {first.pid}" in p.stderr, True)
first.terminate()
first.wait(timeout=30)
first.stdout.close()
p = run("newcomer", S2, path2)
check("once the first ended, the file is free", p.returncode, 0)

# --- a write refused, told everywhere -----------------------------------
r2 = opened(path2)
r2.execute("INSERT INTO notes VALUES (?, 1, 'mine')", (S2,))
r2.execute("INSERT INTO notes VALUES (?, 2, 'in the name of another')", (S1,))
r2.close()
p = run("newcomer", S2, path2, "--json")
check("the agent runs", p.returncode, 0)
events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
refused = [e for e in events if e.get("event") == "refused"]
check("one refused event", len(refused), 1)
e = refused[0] if refused else {}
check("with its table and key", (e.get("table"), e.get("key")), ("notes", [S1, "2"]))
check("its reason", "only its own records" in (e.get("reason") or ""), True)
check("and its SQLSTATE", e.get("sqlstate"), "42501")
rounds = [e for e in events if e.get("event") == "round" and e.get("server_refused")]
check("the round says why", bool(rounds) and "only its own records" in (rounds[0].get("refused_reason") or ""), True)
check("the mine went up", srv.one("SELECT count(*) FROM notes WHERE origin = %s", (S2,)), 1)
check("the other's did not", srv.one("SELECT count(*) FROM notes WHERE origin = %s", (S1,)), 0)

r2 = opened(path2)
rows = json.loads(r2.execute("SELECT sync_progress() -> '$.notes.set_aside_rows'").fetchone()[0] or "null")
r2.close()
check("sync_progress lists the row with its key and SQLSTATE",
      [(x["key"], x["sqlstate"]) for x in rows or []], [([S1, "2"], "42501")])

p = run("newcomer", S2, path2)
check("a person's line tells it too, at the next start", p.returncode == 0 and
      f"notes ({S1}, 2) never goes up" in p.stdout and "only its own records" in p.stdout, True)

health = srv.rows("SELECT kind, key = sync.key(ARRAY[%s, '2']), count, reason, sqlstate FROM sync.health()"
                  " WHERE replica = %s", (S1, S2))
check("sync.health says it, per replica, with its key, reason and SQLSTATE",
      [(k, key, n, "only its own records" in reason, st) for k, key, n, reason, st in health],
      [("writes refused", True, 1, True, "42501")])
check("sync.listing: writes_refused, not caught_up",
      srv.one("SELECT state::text FROM sync.listing() WHERE replica = %s", (S2,)), "writes_refused")
check("sync.overview counts it",
      srv.one("SELECT (sync.overview() -> 'states' ->> 'writes_refused')::int"), 1)
check("the other store is not: its writes all went",
      srv.one("SELECT state::text <> 'writes_refused' FROM sync.listing() WHERE replica = %s", (S1,)), True)

# written again in its own name (its key changes): the row goes; what
# stays refused is the delete of the other's record, said as such
r2 = opened(path2)
r2.execute("UPDATE notes SET origin = ? WHERE id = 2", (S2,))
r2.close()
p = run("newcomer", S2, path2, "--json")
check("written again in its own name", p.returncode, 0)
check("it goes up", srv.one("SELECT count(*) FROM notes WHERE origin = %s", (S2,)), 2)
events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
check("the delete of the other's record is told as refused, once",
      [(e["table"], e["key"]) for e in events if e.get("event") == "refused"], [("notes", [S1, "2"])])
check("sync.health counts it alone",
      srv.rows("SELECT count FROM sync.health() WHERE replica = %s AND kind = 'writes refused'", (S2,)), [(1,)])

# --- a backlog of the worst values a replica can say ----------------------
# counts beyond any bigint sum and a time that is no time: recorded bounded,
# so that no replica can break the fleet's reads (sync.overview, sync.health)
import uuid as uuidlib  # noqa: E402
from wire import checked, field, now_seq  # noqa: E402
big = 2 ** 64 - 1
aside = field(1, "no") + field(2, "") + field(3, big) + field(4, field(1, S2) + field(1, "9")) + field(5, 2 ** 62)
backlog = field(1, "notes") + field(2, big) + field(3, big) + field(4, big) + field(5, big) + field(6, aside)
body = (field(1, 1) + field(2, uuidlib.UUID(S2).bytes) + field(3, os.urandom(16)) + field(8, backlog)
        + field(8, field(1, "other") + field(4, big)) + field(11, now_seq()))
srv.file(S2, checked(body))
check("the worst counts are recorded bounded",
      srv.one("SELECT (backlog -> 'notes' ->> 'set_aside')::bigint FROM sync.replicas WHERE id = %s", (S2,)), 2 ** 40)
check("sync.overview still reads", srv.one("SELECT (sync.overview() -> 'states' ->> 'writes_refused')::int"), 1)
check("sync.listing too (the table not mirrored is not kept)",
      srv.one("SELECT writes_set_aside FROM sync.listing() WHERE replica = %s", (S2,)), 2 ** 40)
check("sync.health says it, with no time",
      srv.rows("SELECT count, since FROM sync.health() WHERE replica = %s AND reason = 'no'", (S2,)), [(2 ** 40, None)])
finish()
