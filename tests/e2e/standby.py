#!/usr/bin/python3
"""standby.py - a hot standby whose replay is stuck (issue 38): it received the
primary's WAL but does not replay it (paused here; a query in conflict with
replay, or replay slower than the primary writes, hold it the same way).
Served by it, a replica would see nothing new until its agent's next pull
from the primary, up to 10 minutes later, and no one would notice.

  - sync.pull on it refuses, once its replay has stayed behind for longer
    than magic_sync.standby_lag, with a transient SQLSTATE (57P03) and a
    message naming the lag, the positions and the pause;
  - the agent, pulling from it (--pull), takes the refusal as a standby's
    failure and pulls from the primary: the change reaches the replica in
    seconds, and the agent said why;
  - the standby's replay resumed, it serves pulls again;
  - the agent listens too (--listen): while the standby serves, no pull goes
    on the listening connection; the pulls the standby refused go to the
    primary on it.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time

import psycopg2
import psycopg2.errors

from harness import Server, check, finish, json_lines, wait_until, TOP

DB = "standby_e2e"
STORE = "5b5b5b5b-0000-4000-8000-000000000001"
PASSWORD = "pw-store"
PORT = os.environ.get("PGPORT", "5432")
BIN = "/usr/lib/postgresql/15/bin"
AGENT = os.path.join(TOP, "magic_sync_agent")
tmp = tempfile.mkdtemp(prefix="standby_e2e.")
os.chmod(tmp, 0o755)


def path(name):
    return os.path.join(tmp, name)


def as_postgres(cmd):
    subprocess.run(["su", "postgres", "-c", cmd], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env={**os.environ, "PGPASSWORD": os.environ.get("PGPASSWORD", "")})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(seconds, test):
    return wait_until(seconds, test, Exception)


# ---- the primary: a table broadcast to one store, whose role is its own ----------
srv = Server(DB)
srv.exec(f"CREATE ROLE store_a LOGIN PASSWORD '{PASSWORD}'")
srv.exec("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
srv.exec("INSERT INTO items VALUES (1, 'first'), (2, 'second')")
srv.exec("SELECT sync.mirror('items', 'catalog', 'broadcast')")
srv.exec("SELECT sync.replica_add(%s, role => 'store_a')", (STORE,))
srv.relay()

# ---- a streaming standby on a second port, replay bounded to 1 s behind ------------
standby_port = free_port()
standby = path("standby")
os.mkdir(standby, 0o700)
shutil.chown(standby, "postgres", "postgres")
os.mkdir(path("run"), 0o755)
shutil.chown(path("run"), "postgres", "postgres")
as_postgres(f"pg_basebackup -h localhost -p {PORT} -U {os.environ.get('PGUSER', 'postgres')} "
            f"-D {standby} -R -X stream -c fast")
with open(os.path.join(standby, "postgresql.conf"), "w") as f:
    f.write(f"port = {standby_port}\nlisten_addresses = 'localhost'\nunix_socket_directories = '{path('run')}'\n"
            "shared_preload_libraries = 'magic_sync'\nhot_standby = on\nmagic_sync.standby_lag = 1\n"
            + "".join(f"{g} = {srv.one(f'SHOW {g}')}\n" for g in
                      ("max_connections", "max_worker_processes", "max_wal_senders",
                       "max_prepared_transactions", "max_locks_per_transaction"))
            + f"hba_file = '{srv.one('SHOW hba_file')}'\n")
as_postgres(f"{BIN}/pg_ctl -D {standby} -w -l {path('run')}/standby.log start")


def standby_conn(user=None, password=None):
    c = psycopg2.connect(dbname=DB, host="localhost", port=standby_port,
                         user=user or os.environ.get("PGUSER"), password=password or os.environ.get("PGPASSWORD"))
    c.autocommit = True
    return c


def standby_one(sql, args=None):
    with standby_conn() as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


def store_pull_on_standby():
    """sync.pull on the standby as the store's role: (rows, None) or (None, error)."""
    with standby_conn("store_a", PASSWORD) as c, c.cursor() as cur:
        try:
            cur.execute("SELECT number FROM sync.pull(%s, 0)", (STORE,))
            return cur.fetchall(), None
        except psycopg2.Error as e:
            return None, e


def relay():
    """A relay pass; one that an agent's filing made fail (40001) runs again."""
    for _ in range(50):
        try:
            return srv.relay()
        except psycopg2.errors.SerializationFailure:
            time.sleep(0.1)
    return srv.relay()


def caught_up():
    lsn = srv.one("SELECT pg_current_wal_lsn()::text")
    return wait_for(30, lambda: standby_one("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)))


check("the standby is in recovery", standby_one("SELECT pg_is_in_recovery()"), True)
check("it replays the primary", caught_up(), True)
check("its bound is the one set", standby_one("SHOW magic_sync.standby_lag"), "1s")
rows, err = store_pull_on_standby()
check("a standby that keeps up serves the store's pulls", err is None and len(rows) > 0, True)

# ---- the store's agent pulls from the standby ------------------------------------------
db = path("store.db")
log = path("agent.log")
primary = f"host=localhost port={PORT} dbname={DB} user=store_a password={PASSWORD}"
at_standby = f"host=localhost port={standby_port} dbname={DB} user=store_a password={PASSWORD}"
with open(log, "w") as out:
    agent = subprocess.Popen([AGENT, "--server", primary, "--pull", at_standby, "--replica", STORE,
                              "--listen", primary + " application_name=standby_listen",
                              "--db", db, "--json", "--interval", "500"], stdout=out, stderr=subprocess.STDOUT)


def listening():
    """the last statement of the agent's listening session on the primary"""
    return srv.one("SELECT query FROM pg_stat_activity WHERE application_name = 'standby_listen'")


def last_on_listener():
    """what the listening session ran last, and when it began"""
    return srv.one("SELECT query || ' @ ' || query_start FROM pg_stat_activity"
                   " WHERE application_name = 'standby_listen'")


def name_of(key):
    try:
        with sqlite3.connect(db) as c:
            r = c.execute("SELECT name FROM items WHERE id = ?", (key,)).fetchone()
            return r[0] if r else None
    except sqlite3.Error:
        return None


def events():
    return json_lines(log)


check("the store takes its snapshot", wait_for(60, lambda: name_of(1) == "first"), True)
srv.exec("UPDATE items SET name = 'through the standby' WHERE id = 2")
relay()
check("a change reaches it through the standby", wait_for(60, lambda: name_of(2) == "through the standby"), True)
check("no standby's pull failed while it kept up",
      [e for e in events() if e.get("event") == "error" and "standby" in e.get("what", "")], [])
check("the agent listens on the primary", wait_for(30, lambda: listening() is not None), True)
# the listener connects before the agent's first round, so that round's pull (the
# primary checks the claim) may have gone on it: what counts is that it runs nothing
# while the standby serves
listened = last_on_listener()
srv.exec("UPDATE items SET name = 'standby first' WHERE id = 2")
relay()
check("a change after it listens reaches it", wait_for(60, lambda: name_of(2) == "standby first"), True)
check("through the standby: its listening session ran nothing more", last_on_listener(), listened)

# ---- replay stuck: paused, while the primary writes ----------------------------------
standby_one("SELECT pg_wal_replay_pause() IS NULL")
check("the pause takes", wait_for(30, lambda: standby_one("SELECT pg_get_wal_replay_pause_state()") == "paused"), True)
srv.exec("UPDATE items SET name = 'while replay is stuck' WHERE id = 1")
relay()
lsn = srv.one("SELECT pg_current_wal_lsn()::text")
check("the standby receives the change", wait_for(30, lambda: standby_one(
    "SELECT pg_last_wal_receive_lsn() >= %s::pg_lsn", (lsn,))), True)
check("and does not replay it", standby_one("SELECT pg_last_wal_replay_lsn() < %s::pg_lsn", (lsn,)), True)
began = time.time()
check("the agent pulls the change from the primary, in seconds",
      wait_for(60, lambda: name_of(1) == "while replay is stuck"), True)
print(f"the change reached the store {time.time() - began:.1f}s after the standby received it", flush=True)
failed = [e for e in events() if e.get("event") == "error" and "standby" in e.get("what", "")]
check("the agent says the standby's pull failed", len(failed) > 0, True)
check("and why: its replay is behind", any("replay has stayed behind" in json.dumps(e) for e in failed), True)
check("the primary's pulls went on the listening session", "sync.pull(" in (listening() or ""), True)

time.sleep(1.2)
rows, err = store_pull_on_standby()
check("sync.pull on the stuck standby refuses", err is not None, True)
if err is not None:
    check("transiently (57P03)", err.pgcode, "57P03")
    check("transient by sync.is_transient too", srv.one("SELECT sync.is_transient(%s)", (err.pgcode,)), True)
    msg = err.diag.message_primary or ""
    detail = err.diag.message_detail or ""
    check("naming the lag", msg.startswith("this standby's replay has stayed behind the WAL it received for ")
          and msg.endswith(" s: pull from the primary"), True)
    check("the positions, the pause and the bound", "replayed up to" in detail and "its replay is paused" in detail
          and "magic_sync.standby_lag is 1 s" in detail, True)
    check("and what to do", "pg_get_wal_replay_pause_state()" in (err.diag.message_hint or ""), True)
with standby_conn() as c, c.cursor() as cur:
    try:
        cur.execute("SELECT count(*) FROM sync.pull(%s, 0)", (STORE,))
        code = None
    except psycopg2.Error as e:
        code = e.pgcode
    check("so does a superuser's", code, "57P03")
check("the store holds the primary's change",
      name_of(1), "while replay is stuck")

# ---- replay resumes: the standby serves again ---------------------------------------
standby_one("SELECT pg_wal_replay_resume() IS NULL")
check("it catches up", caught_up(), True)
rows, err = store_pull_on_standby()
check("a standby that caught up serves pulls again", err is None and len(rows) > 0, True)

agent.terminate()
check("the agent stops cleanly", agent.wait(timeout=30), 0)
as_postgres(f"{BIN}/pg_ctl -D {standby} -w stop -m fast")
shutil.rmtree(tmp, ignore_errors=True)
finish()
