"""What the benches of one mirrored table and one replica do alike (bench/pullcost.py).

  inside(db, options)   re-runs the calling script in a throw-away cluster (scripts/isolated
                        gives it a machine of its own), with fsync and synchronous_commit on,
                        the worker relaying in db, and the server options given
  connect, val, wait    an autocommit session; one value of a statement; a condition awaited
  provisioned(cur, n)   bench/hops.py's table (items: id bigint key, store uuid, name text) of
                        n rows broadcast to one replica, provisioned by the real agent, which
                        then stops; returns the replica's uuid and its SQLite file
"""
import os
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inside(db, options=""):
    if os.environ.get("MS_BENCH_INSIDE"):
        return
    script = os.path.abspath(sys.argv[0])
    sys.exit(subprocess.call(
        ["sh", "-c", '. scripts/lib.sh && ms_ready && ms_cluster -o fsync=on -o synchronous_commit=on ' + options +
         ' -o magic_sync.database=' + db + ' env MS_BENCH_INSIDE=1 /usr/bin/python3 "$0" "$@"', script] + sys.argv[1:],
        cwd=ROOT))


def connect(db):
    import psycopg2  # inside the cluster only
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


def val(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]


def wait(what, predicate, timeout=1800):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def provisioned(db, cur, n):
    cur.execute("CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, name text NOT NULL)")
    cur.execute("INSERT INTO items SELECT g, ('00000000-0000-0000-0000-' || lpad(to_hex(1 + g %% 200), 12, '0'))::uuid,"
                " 'i' || g FROM generate_series(1, %s) g", (n,))
    cur.execute("VACUUM ANALYZE items")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("SELECT sync.mirror('items', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.wake()")
    wait("the declaration's notes", lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"))
    replica = str(uuid.uuid4())
    cur.execute("SELECT sync.replica_add(%s)", (replica,))
    cur.execute("SELECT sync.wake()")
    work = f"/tmp/ms_bench_{os.getpid()}"
    os.makedirs(work, exist_ok=True)
    agent = subprocess.Popen([os.path.join(ROOT, "magic_sync_agent"), "--server", f"dbname={db}",
                              "--replica", replica, "--db", work + "/replica.db", "--quiet"])
    wait("the replica's snapshot",
         lambda: val(cur, "SELECT NOT EXISTS (SELECT FROM sync.notes WHERE NOT done)"
                          " AND NOT EXISTS (SELECT FROM sync.replicas WHERE provision OR acked_number < last_number)"))
    agent.terminate()
    agent.wait()
    return replica, work + "/replica.db"
