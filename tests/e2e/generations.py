#!/usr/bin/python3
"""generations.py - generation fencing on promotion (issue 19, item 11; seed
002's generations): a streaming standby of the primary is promoted after it
lagged, while the old primary keeps running.

  - the promoted server raises its generation (its timeline changed): no new
    epoch, no fleet-wide snapshot;
  - only the replicas that applied history the new primary lacks (they
    applied and acknowledged messages it never wrote for them) are
    provisioned again; the one that did not carries on from where it is;
  - the old primary's messages, queued and new, are refused by every replica
    that follows the new generation, with the reason; the old primary refuses
    what those replicas say (a pull, an upload);
  - a stale snapshot replayed by a transport never takes a replica back in
    time: not an old primary's, not one of an epoch that ended.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import socket
import subprocess
import tempfile
import time

import psycopg2

from harness import Replica, Server, check, finish, settle

A = "a0a0a0a0-1111-4111-8111-000000000001"
B = "b0b0b0b0-2222-4222-8222-000000000002"
C = "c0c0c0c0-3333-4333-8333-000000000003"
tmp = tempfile.mkdtemp()
os.chmod(tmp, 0o777)
host = os.environ.get("PGHOST", "localhost")


def pg(cmd):
    subprocess.run(["su", "postgres", "-c", cmd], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PGPASSWORD": os.environ.get("PGPASSWORD", "")})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port):
    server = Server.__new__(Server)
    server.db = "gen"
    server.conn = psycopg2.connect(dbname="gen", port=port, host=host,
                                   user=os.environ.get("PGUSER"), password=os.environ.get("PGPASSWORD"))
    server.conn.autocommit = True
    server.exec("SET client_min_messages = error")
    return server


def rows_of(srv):
    return dict(srv.rows("SELECT id, name FROM products"))


def same(name, srv, r):
    w = srv.wanted(r.id)
    got = {"products": r.keys("products", ["id"]), "tasks": r.keys("tasks", ["id"])}
    check(f"{name}: {r.id[:8]} holds what the server wants it to", got, {t: w.get(t, set()) for t in got})
    check(f"{name}: {r.id[:8]} has the server's rows", dict(r.q("SELECT id, name FROM products")), rows_of(srv))


def snapshots(srv):
    return dict(srv.rows("SELECT id::text, coalesce(snapshot_number, 0) FROM sync.replicas"))


def applied(r):
    return bytes(r.one("SELECT sync_applied()"))


def generation_of(srv):
    """The server's current generation (None from a build that numbers none)."""
    try:
        return srv.one("SELECT max(generation) FROM sync.generations")
    except psycopg2.Error:
        return None


def newest_generation(srv):
    try:
        return srv.rows("SELECT generation, timeline, reason FROM sync.generations ORDER BY generation DESC LIMIT 1")[0]
    except psycopg2.Error:
        return (None, None, "")


def applied_or_none(r):
    try:
        return applied(r)
    except Exception:
        return b""


def sqlstate(srv, sql, args):
    try:
        srv.rows(sql, args)
        return "ok"
    except psycopg2.Error as e:
        return f"{e.pgcode}: {e.pgerror}"


# --- the primary, its replicas, and a snapshot kept for later --------------------
primary = Server("gen")
primary.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE tasks (id bigint PRIMARY KEY, store uuid NOT NULL, what text NOT NULL);
CREATE TABLE sales (store uuid, id int, total int NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('tasks', 'catalog', 'assigned(store)');
SELECT sync.mirror('sales', 'record', origin => 'store');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 20) g;
""")
for i, r in enumerate((A, B, C)):
    primary.exec("SELECT sync.replica_add(%s)", (r,))
    primary.exec("INSERT INTO tasks VALUES (%s, %s, 'count')", (i + 1, r))
reps = {r: Replica(primary, r, os.path.join(tmp, f"{r[:4]}.db")) for r in (A, B, C)}
a, b, c = reps[A], reps[B], reps[C]
primary.relay()
# C's first snapshot, as a transport might keep it and replay it much later
stale = [bytes(m) for _, m in primary.pull(C, 0)]
settle(primary, [a, b, c])
same("at first", primary, c)
generation = generation_of(primary)

# --- a streaming standby, which stops receiving ---------------------------------
port = free_port()
standby = os.path.join(tmp, "standby")
pg(f"pg_basebackup -h {host} -p {os.environ['PGPORT']} -U {os.environ.get('PGUSER', 'postgres')} "
   f"-D {standby} -R -X stream -c fast")
with open(os.path.join(standby, "postgresql.conf"), "w") as f:
    f.write(f"port = {port}\nlisten_addresses = 'localhost'\nunix_socket_directories = '{tmp}'\n"
            f"shared_preload_libraries = 'magic_sync'\nhot_standby = on\n"
            + "".join(f"{g} = {primary.one(f'SHOW {g}')}\n" for g in
                      ("max_connections", "max_worker_processes", "max_wal_senders",
                       "max_prepared_transactions", "max_locks_per_transaction"))
            + f"hba_file = '{primary.one('SHOW hba_file')}'\nident_file = '{primary.one('SHOW ident_file')}'\n")
pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w -l {standby}.log start")
try:
    sconn = psycopg2.connect(dbname="gen", port=port, host=host,
                             user=os.environ.get("PGUSER"), password=os.environ.get("PGPASSWORD"))
    sconn.autocommit = True
    scur = sconn.cursor()
    lsn = primary.one("SELECT pg_current_wal_lsn()::text")
    for _ in range(200):
        scur.execute("SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", (lsn,))
        if scur.fetchone()[0]:
            break
        time.sleep(0.1)
    scur.execute("ALTER SYSTEM SET primary_conninfo = ''")
    scur.execute("SELECT pg_reload_conf()")
    for _ in range(200):
        scur.execute("SELECT count(*) FROM pg_stat_wal_receiver")
        if scur.fetchone()[0] == 0:
            break
        time.sleep(0.1)
    sconn.close()

    # the primary goes on: A and B take and acknowledge what the standby never sees; C is away
    primary.exec("UPDATE products SET name = 'lost at failover' WHERE id = 6")
    primary.relay()
    for r in (a, b):
        r.sync()
    check("A and B took what the primary acknowledged",
          [r.one("SELECT name FROM products WHERE id = 6") for r in (a, b)], ["lost at failover"] * 2)
    check("C did not", c.one("SELECT name FROM products WHERE id = 6"), "p6")

    # --- the standby is promoted; the old primary keeps running -----------------
    pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w promote")
    promoted = connect(port)
    for _ in range(100):
        if not promoted.one("SELECT pg_is_in_recovery()"):
            break
        time.sleep(0.1)
    epochs = promoted.one("SELECT count(*) FROM sync.epoch")
    before = snapshots(promoted)
    promoted.relay()
    newest = newest_generation(promoted)
    check("the promoted server raised its generation", newest[0] is not None and newest[0] > generation, True)
    check("on its new timeline", newest[1], promoted.one(
        "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"))
    check("for the reason: its timeline changed", "timeline" in newest[2], True)
    check("the old primary did not", generation_of(primary), generation)
    # A has a sale to file: its upload says what it applied, with the seal of a
    # message the promoted server never wrote (an earlier build began an epoch for it)
    a.q("INSERT INTO sales VALUES (?, 1, 10)", (A,))
    for r in (a, b, c):
        r.server = promoted
        r.sync()
    promoted.relay()
    # A's snapshot from the promoted server, as a transport might keep it
    kept = [bytes(m) for n, m in promoted.pull(A, 0) if n is not None]
    promoted.exec("UPDATE products SET name = 'after the promotion' WHERE id = 7")
    settle(promoted, [a, b, c])
    after = snapshots(promoted)
    check("A and B applied what the promoted server lacks: provisioned again",
          [after[r] > before[r] for r in (A, B)], [True, True])
    check("C did not: it carried on without a snapshot", after[C], before[C])
    check("no new epoch: nobody else was provisioned for it", promoted.one("SELECT count(*) FROM sync.epoch"), epochs)
    check("A's sale was filed by the promoted server",
          promoted.one("SELECT total FROM sales WHERE store = %s AND id = 1", (A,)), 10)
    for r in (a, b, c):
        same("after the promotion", promoted, r)
    check("the write lost at failover is gone from A and B too",
          [r.one("SELECT name FROM products WHERE id = 6") for r in (a, b)], ["p6", "p6"])
    check("every replica follows the new generation",
          [r.status().get("generation") for r in (a, b, c)], [newest[0]] * 3)

    # --- the old primary, still running, writes on -------------------------------
    primary.exec("UPDATE products SET name = 'from the old primary' WHERE id = 8")
    primary.relay()
    for r in (a, b, c):
        results = [r.apply(bytes(m)) for n, m in primary.pull(r.id, 0) if n is not None]
        check(f"{r.id[:8]} refuses the old primary's messages",
              sorted({x["result"] for x in results}), ["older_generation"])
        check(f"{r.id[:8]} says why", "generation" in (r.status().get("last_error") or ""), True)
    check("none of them took its write", [r.one("SELECT name FROM products WHERE id = 8") for r in (a, b, c)],
          ["p8"] * 3)
    said = sqlstate(primary, "SELECT * FROM sync.pull(%s, %s, 1048576, %s)",
                    (A, a.status()["applied"], psycopg2.Binary(applied_or_none(a))))
    check("the old primary refuses a pull from a replica of the newer generation", said.split(":")[0], "55000")
    check("saying it was superseded", "superseded" in said, True)
    a.one("SELECT sync_config('resend_after', 0)")
    a.q("INSERT INTO sales VALUES (?, 2, 20)", (A,))
    up = bytes(a.one("SELECT sync_upload()"))
    said = sqlstate(primary, "SELECT sync.file(%s, %s)", (A, psycopg2.Binary(up)))
    check("and its upload: the sale goes to the new primary only", said.split(":")[0], "55000")
    check("the old primary filed nothing of it", primary.one("SELECT count(*) FROM sales WHERE id = 2"), 0)
    settle(promoted, [a, b, c])
    check("the new primary has the sale", promoted.one("SELECT total FROM sales WHERE store = %s AND id = 2", (A,)), 20)

    # --- stale snapshots replayed ------------------------------------------------
    results = [c.apply(m) for m in stale]
    check("C refuses its first snapshot, replayed", {x["result"] for x in results}, {"older_generation"})
    same("after the replay", promoted, c)
    # a snapshot of an epoch that ended
    promoted.exec("SELECT sync.epoch_begin('generations.py')")
    settle(promoted, [a, b, c])
    check("a new epoch raised the generation again",
          newest[0] is not None and (generation_of(promoted) or 0) > newest[0], True)
    check("A's snapshot of the ended epoch was kept", len(kept) > 1, True)
    res = [a.apply(m)["result"] for m in kept]
    check("A refuses the snapshot of the epoch that ended, replayed", set(res), {"older_generation"})
    same("after the epoch's replay", promoted, a)
finally:
    pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w stop -m fast")
finish()
