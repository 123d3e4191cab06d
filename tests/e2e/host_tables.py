#!/usr/bin/python3
"""host_tables.py - a replica's host tables are the host's (issue 38.5), and
a full disk is said as one (38.9), with magic_sync_agent as a real process
and real SQLite files:

  - store 1's app has a table of its own named notes (its column, index,
    trigger and rows) before the server mirrors a table notes: the snapshot
    leaves the app's table as it was, its rows and writes included, and the
    replica refuses the server's rows; the server records them refused, with
    the replica's reason, and sync.health lists them;
  - the app renames its table, and reports a new build (the server sends the
    rows refused again at once): the next message makes the server's notes,
    and its rows arrive; the app's table, renamed, keeps its rows;
  - store 2's file lives on a tmpfs of its own, filled: the server's rows
    cannot be written, and the agent --once says the disk is full and exits
    74 (it said "the replica file stays busy", and exited 70); once there is
    room, the rows arrive.

Run by tests/e2e/run (inside pg_virtualenv, under scripts/isolated: mounting
the tmpfs needs root and a mount namespace of its own)."""
import json
import os
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "62626262-0000-4000-8000-000000000001"
S2 = "62626262-0000-4000-8000-000000000002"
tmp = tempfile.mkdtemp(prefix="host_tables.")
small = os.path.join(tmp, "small")
os.mkdir(small)
paths = {S1: os.path.join(tmp, "1.db"), S2: os.path.join(small, "2.db")}

srv = Server("host_tables")
srv.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('notes', 'catalog', 'broadcast');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee');
INSERT INTO notes VALUES (1, 'open at nine'), (2, 'closed on sunday');
""")
for s in (S1, S2):
    srv.exec("SELECT sync.replica_add(%s)", (s,))


def agent(replica):
    """magic_sync_agent --once for one store: (exit code, its JSON events)"""
    p = subprocess.run([AGENT, "--server", "dbname=host_tables", "--replica", replica, "--db", paths[replica],
                        "--once", "--json"], capture_output=True, text=True, timeout=120)
    events = []
    for line in (p.stdout + p.stderr).splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"event": "text", "text": line})
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    return p.returncode, events


def store(replica):
    return Replica(srv, replica, paths[replica])


def host_sql(r):
    return r.q("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'notes' ORDER BY name")


# store 1's app made its own notes before the server mirrored one
r = store(S1)
r.q("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT, pinned INTEGER)")
r.q("CREATE INDEX notes_pinned ON notes(pinned)")
r.q("CREATE TABLE app_log (id INTEGER)")
r.q("CREATE TRIGGER notes_log AFTER INSERT ON notes BEGIN INSERT INTO app_log VALUES (NEW.id); END")
r.q("INSERT INTO notes VALUES (1, 'buy milk', 1), (7, 'call Bob', 0)")
before = host_sql(r)
r.close()

srv.relay()
code, _ = agent(S1)
check("store 1 is provisioned", code, 0)
r = store(S1)
check("the app's notes, its index and trigger are as they were", host_sql(r), before)
check("with its rows", r.q("SELECT id, text, pinned FROM notes ORDER BY id"), [(1, 'buy milk', 1), (7, 'call Bob', 0)])
r.q("INSERT INTO notes VALUES (9, 'new', 0)")
check("the app still writes it, its trigger runs", r.one("SELECT count(*) FROM app_log WHERE id = 9"), 1)
check("products is held", r.q("SELECT id, name FROM products ORDER BY id"), [(1, 'tea'), (2, 'coffee')])
progress = json.loads(r.one("SELECT sync_progress()"))
check("sync_progress says why notes is not held",
      "the host's own table \"notes\"" in progress.get("notes", {}).get("not_held", ""), True)
r.close()
reasons = srv.rows("SELECT h.refused FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                   " WHERE h.replica = %s AND t.name = 'notes' ORDER BY h.key", (S1,))
check("the server knows store 1 refused both rows of notes, and why",
      [r_ is not None and "host's own table \"notes\"" in r_ for (r_,) in reasons], [True, True])
health = srv.rows("SELECT replica::text FROM sync.health() WHERE kind = 'rows refused'")
check("sync.health lists them", [h[0] for h in health], [S1])
check("nothing of products is refused",
      srv.one("SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
              " WHERE h.replica = %s AND t.name = 'products' AND h.refused IS NOT NULL", (S1,)), 0)

# another pass (a change of the server's): still the app's
srv.exec("UPDATE notes SET body = 'open at ten' WHERE id = 1")
srv.relay()
check("a change relayed", agent(S1)[0], 0)
r = store(S1)
check("the app's notes is untouched still", (host_sql(r), r.one("SELECT count(*) FROM notes")), (before, 3))
r.q("ALTER TABLE notes RENAME TO my_notes")
check("the app deploys a fix: its own table renamed, its build raised", r.one("SELECT sync_config('app_build', 2)"), 2)
r.close()
check("its next upload says the new build", agent(S1)[0], 0)
srv.relay()
check("the rows refused are sent again, and taken", agent(S1)[0], 0)
r = store(S1)
check("the server's notes is made, with its rows",
      r.q("SELECT id, body FROM notes ORDER BY id"), [(1, 'open at ten'), (2, 'closed on sunday')])
check("the app's, renamed, keeps its rows", r.one("SELECT count(*) FROM my_notes"), 3)
check("and its index and trigger",
      r.one("SELECT count(*) FROM sqlite_master WHERE name IN ('notes_pinned', 'notes_log') AND tbl_name = 'my_notes'"), 2)
check("store 1 refuses nothing any more", r.one("SELECT count(*) FROM _sync_refused"), 0)
r.close()
check("the server holds store 1's notes, refused no more",
      srv.one("SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
              " WHERE h.replica = %s AND t.name = 'notes' AND h.refused IS NULL AND h.taken IS NULL", (S1,)), 2)

# store 2's disk: a tmpfs of its own, provisioned, then filled
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", small], check=True)
try:
    check("store 2 is provisioned", agent(S2)[0], 0)
    filler = os.path.join(small, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    # room for the file to open (its WAL index), none for the rows
    os.ftruncate(fd, os.fstat(fd).st_size - 48 * 1024)
    os.close(fd)
    srv.exec("INSERT INTO products SELECT i, repeat('a product whose name takes room ', 8) || i"
             " FROM generate_series(10, 400) i")
    srv.relay()
    code, events = agent(S2)
    errors = [e for e in events if e.get("event") == "error"]
    stop = [e for e in events if e.get("event") == "stop"]
    check("a full disk: the agent --once exits 74", code, 74)
    check("and says the disk is full",
          any("disk is full" in (e.get("what", "") + e.get("error", "")) for e in errors), True)
    check("not that the file is busy",
          any("busy" in (e.get("what", "") + e.get("reason", "")) for e in errors + stop), False)
    check("its stop says why", [s.get("reason") for s in stop], ["the replica file's disk is full"])
    os.remove(filler)
    check("with room again, the rows arrive", agent(S2)[0], 0)
    r = store(S2)
    check("every product", r.one("SELECT count(*) FROM products"), 393)
    r.close()
finally:
    subprocess.run(["umount", small])

finish()
