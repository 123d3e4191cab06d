#!/usr/bin/python3
"""narrowing.py - uploads refused for good are narrowed down (issue 19 item
7), and the agent says what became of an edit (item 5), with
magic_sync_agent as a real process against a real server:

  - the server's upload_bytes is smaller than what the replica sends: the
    agent sends half, then half again, files every row that fits, and sets
    aside the one row that never can, counted in the backlog; once the bound
    is raised, an agent that starts tries that row again and it is filed, and
    an agent running tries it again when the server's bound changes;
  - a server that refuses every upload: nothing is set aside, the agent
    backs off (with --once it exits 70), and everything is filed once it is
    fixed;
  - a record edited without raising its version: the agent's round line says
    it was dropped, and why.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import signal
import sqlite3
import subprocess
import tempfile
import time

from harness import EXTENSION, TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "51515151-0000-4000-8000-000000000001"
tmp = tempfile.mkdtemp(prefix="narrowing.")
path = os.path.join(tmp, "store.db")

srv = Server("narrowing")
srv.exec("""
CREATE TABLE notes (store uuid, id int, body text NOT NULL, v bigint NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('notes', 'record', origin => 'store', version => 'v');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))


def agent(*extra, json_lines=True):
    """magic_sync_agent --once: its exit code and what it said"""
    args = [AGENT, "--server", "dbname=narrowing", "--replica", S1, "--db", path, "--once"]
    if json_lines:
        args.append("--json")
    p = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=120)
    if not json_lines:
        return p.returncode, p.stdout + p.stderr
    events = []
    for line in p.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            check(f"the agent's line is JSON: {line!r}", False, True)
    return p.returncode, events


def rounds(events, field):
    return sum(e.get(field, 0) for e in events if e["event"] == "round")


def store():
    return Replica(srv, S1, path)


def progress(r):
    return json.loads(r.one("SELECT sync_progress()")).get("notes", {})


srv.relay()                                    # a pass by hand: the snapshot is written
rc, events = agent()
check("the agent provisions the store", (rc, rounds(events, "snapshots")), (0, 1))

# --- too large for the server: narrowed down, one row set aside ---------------
srv.exec("ALTER DATABASE narrowing SET magic_sync.upload_bytes = '4kB'")
r = store()
for i in range(1, 21):
    r.q("INSERT INTO notes VALUES (?, ?, ?, 1)", (S1, i, f"note {i}, a few words long"))
r.q("INSERT INTO notes VALUES (?, 21, ?, 1)", (S1, "x" * 6000))
r.close()
rc, events = agent()
check("7 the agent settles although the server refuses its upload", rc, 0)
check("7 every row that fits is filed", srv.one("SELECT count(*) FROM notes WHERE id <= 20"), 20)
check("7 the row that never can is not", srv.one("SELECT count(*) FROM notes WHERE id = 21"), 0)
check("7 the agent says it narrowed down and set one row aside",
      (rounds(events, "narrowed") > 0, rounds(events, "blamed")), (True, 1))
r = store()
check("7 the row is set aside, counted in the backlog", progress(r).get("set_aside"), 1)
why = r.one("SELECT set_aside FROM _sync_notes WHERE key LIKE '%2:21'")
check("7 with the server's reason", "too large" in (why or "") and "upload_bytes" in (why or ""), True)
r.close()
rc, events = agent()
check("7 an agent that starts again while the bound is the same tries it again", rounds(events, "blamed"), 1)
srv.exec("ALTER DATABASE narrowing RESET magic_sync.upload_bytes")
rc, events = agent()
check("7 once the bound is raised, the row is filed", (rc, srv.one("SELECT count(*) FROM notes WHERE id = 21")), (0, 1))
r = store()
check("7 and nothing is set aside any more", progress(r).get("set_aside"), 0)
r.close()

# --- a running agent tries the row again when the server's bound changes ---------
srv.exec("ALTER SYSTEM SET magic_sync.upload_bytes = '4kB'")
srv.exec("SELECT pg_reload_conf()")
running = subprocess.Popen([AGENT, "--server", "dbname=narrowing", "--replica", S1, "--db", path,
                            "--interval", "200", "--quiet"])
r = store()
r.q("INSERT INTO notes VALUES (?, 22, ?, 1)", (S1, "y" * 6000))


def set_aside():
    return r.one("SELECT count(*) FROM _sync_notes WHERE key LIKE '%2:22' AND set_aside LIKE 'too large%'")


def wait(what, seconds, test):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if test():
                return True
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    return False


check("7 the running agent sets the row aside as too large", wait("set aside", 30, lambda: set_aside() == 1), True)
srv.exec("ALTER SYSTEM RESET magic_sync.upload_bytes")
srv.exec("SELECT pg_reload_conf()")
check("7 and files it once the server's bound is raised",
      wait("filed", 30, lambda: srv.one("SELECT count(*) FROM notes WHERE id = 22") == 1), True)
r.close()
running.send_signal(signal.SIGTERM)
check("7 the agent stops cleanly", running.wait(timeout=30), 0)

# --- a server that refuses every upload: nothing set aside, it backs off ------
srv.exec("""
CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the upload path is broken'; END $$;
CREATE TRIGGER broken BEFORE INSERT ON sync.answers FOR EACH ROW EXECUTE FUNCTION broken();
""")
r = store()
for i in range(30, 35):
    r.q("INSERT INTO notes VALUES (?, ?, 'while broken', 1)", (S1, i))
r.close()
rc, events = agent()
check("7 a server that refuses everything: the agent fails (--once: 70)", rc, 70)
r = store()
check("7 and sets nothing aside", progress(r).get("set_aside"), 0)
r.close()
check("7 nothing is filed", srv.one("SELECT count(*) FROM notes WHERE id >= 30"), 0)
srv.exec("DROP TRIGGER broken ON sync.answers")
rc, events = agent()
check("7 once it is fixed, everything is filed", (rc, srv.one("SELECT count(*) FROM notes WHERE id >= 30")), (0, 5))

# --- an edit the server drops: the round line says so, and why ---------------
r = store()
r.q("UPDATE notes SET body = 'edited, the version kept' WHERE id = 1")
r.close()
rc, events = agent()
round_events = [e for e in events if e["event"] == "round"]
check("5 the round says the edit was dropped, not filed", (rounds(events, "dropped"), rounds(events, "filed")), (1, 0))
check("5 and why", any("version" in (e.get("dropped_reason") or "") for e in round_events), True)
r = store()
r.q("UPDATE notes SET body = 'edited again, the version kept' WHERE id = 2")
r.close()
rc, out = agent(json_lines=False)
line = [x for x in out.splitlines() if "dropped" in x]
check("5 a person reads it too", any("version" in x for x in line), True)

finish()
