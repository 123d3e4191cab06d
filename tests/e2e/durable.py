#!/usr/bin/python3
"""durable.py - the agent acknowledges nothing its file could lose (issue
37): its commits wait for no fsync (PRAGMA synchronous = NORMAL), so it
must sync the write-ahead log before any upload leaves for sync.file --
the one place the server learns what the file holds, and after which it
drops the messages acknowledged.

magic_sync_agent --once runs under strace: it applies messages pulled and
stamps its own rows sent (writes to the replica's -wal file), then files.
Every send of sync.file must come after an fsync of the -wal file that
follows the last write to it.  A pull's claim may run ahead of the disk:
the server keeps every message until it is acknowledged, so a file a
crash took back pulls them again (docs/operations.md, "The agent").

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import re
import shutil
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
R = "64757261-0000-4000-8000-000000000001"
tmp = tempfile.mkdtemp(prefix="durable.")
path = os.path.join(tmp, "r.db")
trace = os.path.join(tmp, "agent.trace")

if shutil.which("strace") is None:
    check("strace is installed (the order of the agent's calls is read from it)", False, True)
    finish()

srv = Server("durable")
srv.exec("""
CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL);
CREATE TABLE visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('notes', 'catalog', 'broadcast');
SELECT sync.mirror('visits', 'record', origin => 'store');
INSERT INTO notes SELECT g, 'n' || g FROM generate_series(1, 50) g;
""")
srv.exec("SELECT sync.replica_add(%s)", (R,))
srv.relay()


def agent(traced):
    """magic_sync_agent --once; under strace when traced.  Its exit code."""
    cmd = [AGENT, "--server", "dbname=durable", "--replica", R, "--db", path, "--once", "--json"]
    if traced:
        cmd = ["strace", "-f", "-y", "-s", "256", "-o", trace,
               "-e", "trace=pwrite64,write,writev,sendto,send,fsync,fdatasync"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    return p.returncode


def audit():
    """(writes to the -wal file, its syncs, sends of sync.file, sends made
    with a write to the -wal file not synced since)"""
    wal = f"<{path}-wal>"
    dirty = False
    writes = syncs = files = unsynced = 0
    call = re.compile(r"^\d+\s+(\w+)\((\d+)(<[^>]*>)?")
    with open(trace) as f:
        for line in f:
            m = call.match(line)
            if not m:
                continue
            name, fdpath = m.group(1), m.group(3) or ""
            if fdpath == wal and name in ("pwrite64", "write", "writev"):
                writes += 1
                dirty = True
            elif fdpath == wal and name in ("fsync", "fdatasync"):
                syncs += 1
                dirty = False
            elif name in ("sendto", "send", "write", "writev") and "sync.file(" in line:
                files += 1
                unsynced += dirty
    return writes, syncs, files, unsynced


# the first round: the snapshot applied, its acknowledgement filed
check("the agent provisions the replica", agent(True), 0)
w, s, f, u = audit()
check("it applied to the -wal file, synced it and filed", (w > 0, s > 0, f > 0), (True, True, True))
check("no sync.file left with the -wal file unsynced (first round)", u, 0)

# a change each way: applied (a lazy commit), and a local row stamped sent
srv.exec("UPDATE notes SET body = 'changed' WHERE id <= 10")
srv.relay()
r = Replica(srv, R, path)
r.q("INSERT INTO visits VALUES (?, 1, 'from the replica')", (R,))
r.close()
check("the agent applies and files", agent(True), 0)
w, s, f, u = audit()
check("it applied, synced and filed again", (w > 0, s > 0, f > 0), (True, True, True))
check("no sync.file left with the -wal file unsynced (second round)", u, 0)
check("the server acknowledged what the file holds",
      srv.one("SELECT acked_number = last_number FROM sync.replicas WHERE id = %s", (R,)), True)
check("the replica's row reached the server", srv.one("SELECT note FROM visits WHERE id = 1"),
      "from the replica")
r = Replica(srv, R, path)
check("the change reached the replica", r.one("SELECT count(*) FROM notes WHERE body = 'changed'"), 10)
r.close()

shutil.rmtree(tmp)
finish()
