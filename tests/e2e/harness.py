"""harness.py - real SQLite replicas against a real server, for the scripted
tests.  Each test runs inside pg_virtualenv (PGHOST/PGPORT/PGUSER set) with
Debian's /usr/bin/python3, which can load SQLite extensions.

    server = Server("dbname")                 # psycopg2, autocommit
    r = Replica(server, uuid, "/tmp/x.db")     # sqlite3 + magic_sync_sqlite
    r.sync()                                   # pull, apply, upload, file, pull again
    check("name", got, expected)               # counts passes and failures
"""
import glob
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid as uuidlib

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
EXTENSION = os.path.join(TOP, "magic_sync_sqlite")

passed = 0
failed = 0


def check(name, got, expected):
    global passed, failed
    if got == expected:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: got {got!r}, expected {expected!r}", flush=True)


def finish():
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


def json_lines(path):
    """the JSON objects of a file of lines (an agent's --json output), other lines skipped"""
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def wait_until(seconds, test, errors=(sqlite3.Error, OSError)):
    """whether test() came true within seconds (a test that raises one of errors: not yet)"""
    end = time.time() + seconds
    while time.time() < end:
        try:
            if test():
                return True
        except errors:
            pass
        time.sleep(0.05)
    return False


def file_value(path, key):
    """items.v of key in the replica file at path, read-only (None when it has no such row)"""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute("SELECT v FROM items WHERE id = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def file_exact(path, server):
    """whether the replica file at path holds items (id, v) exactly as the server does"""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return sorted(db.execute("SELECT id, v FROM items").fetchall()) == \
            sorted(server.rows("SELECT id, v FROM items"))
    finally:
        db.close()

def server_log_count(server, text):
    """lines of the cluster's log (pg_virtualenv's: beside its data directory) that hold
    text; None when no log is found"""
    data = server.one("SELECT current_setting('data_directory')")
    logs = glob.glob(os.path.join(data.split("/data/")[0], "log", "*.log"))
    if len(logs) != 1:
        return None
    with open(logs[0], errors="replace") as f:
        return sum(1 for line in f if text in line)


def psql(db, sql):
    """Each statement in a transaction of its own (DROP DATABASE needs it)."""
    args = []
    for stmt in sql.split(";"):
        if stmt.strip():
            args += ["-c", stmt]
    subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", db] + args, check=True,
                   stdout=subprocess.DEVNULL)


class Server:
    def __init__(self, db, create=True, user=None, password=None):
        self.db = db
        if create:
            psql("postgres", f"DROP DATABASE IF EXISTS {db}")
            psql("postgres", f"CREATE DATABASE {db}")
        self.conn = psycopg2.connect(dbname=db, user=user, password=password)
        self.conn.autocommit = True
        if create:
            self.exec("CREATE EXTENSION magic_sync")
        self.exec("SET client_min_messages = error")

    def exec(self, sql, args=None):
        with self.conn.cursor() as c:
            c.execute(sql, args)

    def rows(self, sql, args=None):
        with self.conn.cursor() as c:
            c.execute(sql, args)
            return c.fetchall()

    def one(self, sql, args=None):
        rows = self.rows(sql, args)
        return rows[0][0] if rows else None

    def relay(self):
        """One relay pass, in a REPEATABLE READ transaction of its own as a
        pass needs (src/pg/relay/pass.h); what it did, as a dict."""
        with self.conn.cursor() as c:
            c.execute("SET default_transaction_isolation = 'repeatable read'")
            try:
                c.execute("SELECT * FROM sync.relay_pass()")
                names = [d[0] for d in c.description]
                return dict(zip(names, c.fetchone()))
            finally:
                c.execute("RESET default_transaction_isolation")

    def pull(self, replica, after, max_bytes=1 << 24, applied=None):
        """sync.pull; with `applied` (the replica's sync_applied()), after is its claim, checked."""
        if applied is not None:
            try:
                return self.rows("SELECT number, message FROM sync.pull(%s, %s, %s, %s)",
                                 (replica, after, max_bytes, psycopg2.Binary(applied)))
            except psycopg2.errors.UndefinedFunction:
                pass   # an extension not updated yet takes no claim, as the agent finds
        return self.rows("SELECT number, message FROM sync.pull(%s, %s, %s)", (replica, after, max_bytes))

    def file(self, replica, upload, sender=None):
        return self.one("SELECT sync.file(%s, %s, %s)",
                        (replica, psycopg2.Binary(upload), psycopg2.extras.Json(sender) if sender else None))

    def wanted(self, replica):
        """What the replica should hold: {wire table name: set of canonical keys}."""
        out = {}
        for name, key in self.rows("SELECT t.name, w.key FROM sync.wanted(%s) w JOIN sync.tables t ON t.relid = w.tab",
                                   (replica,)):
            out.setdefault(name, set()).add(key)
        return out

    def held(self, replica):
        """What the engine records the replica holds, acknowledged: {table: set of keys}."""
        out = {}
        for name, key in self.rows(
                "SELECT t.name, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                " JOIN sync.replicas r ON r.id = h.replica"
                " WHERE h.replica = %s AND h.taken IS NULL AND h.refused IS NULL AND h.number <= r.acked_number",
                (replica,)):
            out.setdefault(name, set()).add(key)
        return out


import psycopg2.errors  # noqa: E402  (UndefinedFunction, for an extension not updated yet)
import psycopg2.extras  # noqa: E402  (Json, for the sender)


class Replica:
    def __init__(self, server, replica_id=None, path=":memory:"):
        self.server = server
        self.id = str(replica_id or uuidlib.uuid4())
        self.path = path
        self.open()
        self.last = []

    def open(self):
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.enable_load_extension(True)
        self.db.load_extension(EXTENSION)
        self.db.enable_load_extension(False)
        self.db.execute("SELECT sync_init(?)", (self.id,))

    def close(self):
        self.db.close()

    def q(self, sql, args=()):
        return self.db.execute(sql, args).fetchall()

    def one(self, sql, args=()):
        rows = self.q(sql, args)
        return rows[0][0] if rows else None

    def provisioned(self):
        """Whether a snapshot made its tables: a store writes nothing before."""
        return self.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_sync%' ESCAPE '\\'") > 0

    def status(self):
        import json
        return json.loads(self.one("SELECT sync_status()"))

    def apply(self, message):
        import json
        return json.loads(self.one("SELECT sync_apply(?)", (message,)))

    def applied(self):
        """What the replica says it applied (sync_applied()): the claim a pull makes."""
        return bytes(self.one("SELECT sync_applied()"))

    def pull_apply(self, max_bytes=1 << 24):
        """Pull what waits for this replica, as its agent does, and apply it in order; the results."""
        results = []
        for number, message in self.server.pull(self.id, self.status()["applied"], max_bytes, self.applied()):
            r = self.apply(bytes(message))
            results.append(r)
            if r["result"] in ("gap", "later_protocol", "wrong_replica", "older_generation"):
                break
        self.last = results
        return results

    def upload(self):
        """sync_upload -> sync.file; the filing's answer, or None when nothing to say."""
        up = self.one("SELECT sync_upload()")
        if up is None:
            return None
        return self.server.file(self.id, bytes(up))

    def sync(self, rounds=3):
        """Pull and apply, upload and file, until nothing moves."""
        out = []
        for _ in range(rounds):
            applied = self.pull_apply()
            filed = self.upload()
            out.append((applied, filed))
            if not applied and filed is None:
                break
        return out

    def take_seq(self):
        """A send number for an upload crafted in this replica's name (wire.up):
        beyond what the server filed and what the replica numbered, which then
        numbers beyond it, as if it had sent that upload itself."""
        import wire
        filed = self.server.one("SELECT filed_seq FROM sync.sends WHERE replica = %s", (self.id,)) or 0
        self.q("CREATE TABLE IF NOT EXISTS _sync_seq(id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL)")
        last = self.one("SELECT max(last) FROM _sync_seq") or 0
        n = max(filed, last, wire.now_seq()) + 1
        self.q("INSERT INTO _sync_seq(id, last) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET last = excluded.last", (n,))
        return n

    def digest(self):
        import json
        return json.loads(self.one("SELECT sync_digest()"))

    def keys(self, table, key_columns, retired=None):
        """The canonical keys of a table's live rows (retired ones left out)."""
        cols = ", ".join(f'"{c}"' for c in key_columns)
        live = f' AND "{retired}" IS NULL' if retired else ""
        try:
            return {r[0] for r in self.q(
                f'SELECT sync_key({cols}) FROM "{table}" WHERE sync_key({cols}) NOT IN'
                f' (SELECT key FROM _sync_retired WHERE tbl = ?){live}', (table,))}
        except sqlite3.OperationalError:
            return set()


def settle(server, replicas, passes=6):
    """Relay and sync every replica until nothing moves."""
    for _ in range(passes):
        did = server.relay()
        moved = did["messages"] > 0 or did["provisioned"] > 0
        for r in replicas:
            for applied, filed in r.sync():
                if applied or filed:
                    moved = True
        # a pull may have found a replica to provision (a restore): the next pass does
        if not moved and not server.one("SELECT count(*) FROM sync.replicas WHERE provision"):
            return
