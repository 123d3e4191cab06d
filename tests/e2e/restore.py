#!/usr/bin/python3
"""restore.py - restores and failovers (issue 6; docs/design.md 9,
races and restores): the server's database restored from an older pg_dump, a
replica's file restored from an older copy, and a streaming standby promoted
after it lagged behind (writes the primary acknowledged are lost).  Each time the
replicas notice, are provisioned again, and converge to what the server now
says, row by row; none ever diverges.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import shutil
import subprocess
import tempfile
import time

from harness import Replica, Server, check, finish, psql, settle

S1 = "aaaaaaaa-1111-4111-8111-111111111111"
S2 = "bbbbbbbb-2222-4222-8222-222222222222"
tmp = tempfile.mkdtemp()
os.chmod(tmp, 0o777)


def shop(srv):
    srv.exec("""
    CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
    CREATE TABLE orders (id bigint PRIMARY KEY, store uuid NOT NULL, product bigint NOT NULL REFERENCES products);
    CREATE TABLE sales (store uuid, id int, total int NOT NULL, PRIMARY KEY (store, id));
    SELECT sync.mirror('products', 'catalog', 'broadcast');
    SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
    SELECT sync.mirror('sales', 'record', origin => 'store');
    INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 20) g;
    """)
    srv.exec("INSERT INTO orders VALUES (1, %s, 1), (2, %s, 2)", (S1, S2))
    srv.exec("SELECT sync.replica_add(%s)", (S1,))
    srv.exec("SELECT sync.replica_add(%s)", (S2,))


def same(name, srv, replica):
    """The replica holds exactly what the server wants it to, row by row."""
    w = srv.wanted(replica.id)
    got = {
        "products": replica.keys("products", ["id"]),
        "orders": replica.keys("orders", ["id"]),
        "sales": replica.keys("sales", ["store", "id"]),
    }
    want = {t: w.get(t, set()) for t in got}
    check(f"{name}: {replica.id[:8]} holds what the server wants it to", got, want)
    rows = dict(srv.rows("SELECT id, name FROM products"))
    check(f"{name}: {replica.id[:8]} has the server's rows", dict(replica.q("SELECT id, name FROM products")), rows)


def provisionings(srv):
    return srv.one("SELECT count(*) FROM sync.epoch")


# --- the server's database restored from an older dump ------------------------
srv = Server("shop")
shop(srv)
r1 = Replica(srv, S1, os.path.join(tmp, "s1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "s2.db"))
settle(srv, [r1, r2])
r1.q("INSERT INTO sales VALUES (?, 1, 10)", (S1,))
settle(srv, [r1, r2])
dump = os.path.join(tmp, "shop.dump")
subprocess.run(["pg_dump", "-Fc", "-f", dump, "shop"], check=True)
epoch_before = srv.one("SELECT encode(id, 'hex') FROM sync.epoch WHERE ended IS NULL")

# after the dump: changes the replicas take and acknowledge
srv.exec("UPDATE products SET name = 'renamed after the dump' WHERE id = 1")
srv.exec("INSERT INTO products VALUES (21, 'added after the dump')")
r2.q("INSERT INTO sales VALUES (?, 1, 20)", (S2,))
settle(srv, [r1, r2])
check("the replicas took the changes", r1.one("SELECT name FROM products WHERE id = 1"), "renamed after the dump")

# the server is restored from the dump: it lost them
srv.conn.close()
psql("postgres", "DROP DATABASE shop")
psql("postgres", "CREATE DATABASE shop")
subprocess.run(["pg_restore", "-d", "shop", dump], check=True)
srv = Server("shop", create=False)
r1.server = r2.server = srv
check("the restored server has its own epoch back",
      srv.one("SELECT encode(id, 'hex') FROM sync.epoch WHERE ended IS NULL"), epoch_before)
check("and what it recorded then", srv.one("SELECT count(*) FROM sync.replicas"), 2)
# the replicas apply none of what it numbers again, and say what they applied
# (a pull after a message it never wrote, or a seal it has no record of):
# each is provisioned again, numbered beyond anything it applied
snapshots = dict(srv.rows("SELECT id::text, coalesce(snapshot_number, 0) FROM sync.replicas"))
settle(srv, [r1, r2])
check("each replica was provisioned again",
      all(n > snapshots[i] for i, n in srv.rows("SELECT id::text, snapshot_number FROM sync.replicas")), True)
check("for the reason: the replicas applied what this server has no record of",
      all(any(w in (e or "") for w in ("never wrote", "no record of sending"))
          for (e,) in srv.rows("SELECT last_error FROM sync.replicas")) or
      srv.one("SELECT count(*) FROM sync.epoch") > 1, True)
same("after the server's restore", srv, r1)
same("after the server's restore", srv, r2)
check("the row added after the dump is gone from the replicas too", r1.one("SELECT count(*) FROM products WHERE id = 21"), 0)
# the sale a replica wrote after the dump is lost to the server (the restore
# lost it); the replica follows the server, and may write it again
check("a replica follows the restored server", r2.keys("sales", ["store", "id"]), srv.wanted(S2).get("sales", set()))

# --- a replica's file restored from an older copy ------------------------------
settle(srv, [r1, r2])
epochs = srv.one("SELECT count(*) FROM sync.epoch")
r1.close()
shutil.copy(os.path.join(tmp, "s1.db"), os.path.join(tmp, "s1.old.db"))
r1.open()
srv.exec("UPDATE products SET name = 'newer' WHERE id BETWEEN 2 AND 5")
settle(srv, [r1, r2])
applied = r1.status()["applied"]
r1.close()
shutil.copy(os.path.join(tmp, "s1.old.db"), os.path.join(tmp, "s1.db"))
r1.open()
check("the file went back in time", r1.status()["applied"] < applied, True)
acked = srv.one("SELECT acked_number FROM sync.replicas WHERE id = %s", (S1,))
r1.sync()
# its copy's last message is one the server sealed after its snapshot: the record goes
# back to it and what went after goes again (rewind.c), rather than a snapshot
check("the server notices it applied less than it said: its record taken back to the copy",
      srv.one("SELECT provision OR last_error LIKE '%%restored%%' OR acked_number < %s FROM sync.replicas WHERE id = %s",
              (acked, S1)), True)
settle(srv, [r1, r2])
same("after the replica's restore", srv, r1)
check("no epoch for it: only that replica was provisioned", srv.one("SELECT count(*) FROM sync.epoch"), epochs)

# --- a streaming standby promoted after it lagged --------------------------------
# the primary acknowledged writes the standby never received; after
# promotion they are lost.  Replicas that applied them must not keep them.
def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
standby = os.path.join(tmp, "standby")
host = os.environ.get("PGHOST", "localhost")


def pg(cmd):
    subprocess.run(["su", "postgres", "-c", cmd], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PGPASSWORD": os.environ.get("PGPASSWORD", "")})


# wal_level = replica and max_wal_senders are PostgreSQL 15's defaults
pg(f"pg_basebackup -h {host} -p {os.environ['PGPORT']} -U {os.environ.get('PGUSER', 'postgres')} "
   f"-D {standby} -R -X stream -c fast")
with open(os.path.join(standby, "postgresql.conf"), "w") as f:
    f.write(f"port = {port}\nlisten_addresses = 'localhost'\nunix_socket_directories = '{tmp}'\n"
            f"shared_preload_libraries = 'magic_sync'\nhot_standby = on\n"
            # a standby needs at least the primary's numbers of these
            + "".join(f"{g} = {srv.one(f'SHOW {g}')}\n" for g in
                      ("max_connections", "max_worker_processes", "max_wal_senders",
                       "max_prepared_transactions", "max_locks_per_transaction"))
            +
            f"hba_file = '{srv.one('SHOW hba_file')}'\nident_file = '{srv.one('SHOW ident_file')}'\n")
pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w -l {standby}.log start")
try:
    settle(srv, [r1, r2])
    import psycopg2  # noqa: E402
    sconn = psycopg2.connect(dbname="shop", port=port, host=os.environ.get("PGHOST", "localhost"),
                             user=os.environ.get("PGUSER"), password=os.environ.get("PGPASSWORD"))
    sconn.autocommit = True
    scur = sconn.cursor()
    for _ in range(100):
        scur.execute("SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", (srv.one("SELECT pg_current_wal_lsn()::text"),))
        if scur.fetchone()[0]:
            break
        time.sleep(0.1)
    # the standby stops receiving: what the primary writes next, it never sees
    scur.execute("ALTER SYSTEM SET primary_conninfo = ''")
    scur.execute("SELECT pg_reload_conf()")
    for _ in range(100):
        scur.execute("SELECT count(*) FROM pg_stat_wal_receiver")
        if scur.fetchone()[0] == 0:
            break
        time.sleep(0.1)
    # the primary goes on: the replicas take and acknowledge what the standby never sees
    srv.exec("UPDATE products SET name = 'lost at failover' WHERE id = 6")
    settle(srv, [r1, r2])
    check("the replicas took what the primary acknowledged", r1.one("SELECT name FROM products WHERE id = 6"), "lost at failover")
    sconn.close()
    pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w promote")
    srv.conn.close()
    subprocess.run(["pg_ctlcluster", "15", os.environ.get("PGCLUSTER", "15/regress").split("/")[-1], "stop", "-m", "fast"],
                   check=True, stdout=subprocess.DEVNULL)
    promoted = Server.__new__(Server)
    promoted.db = "shop"
    promoted.conn = psycopg2.connect(dbname="shop", port=port, host=os.environ.get("PGHOST", "localhost"),
                                     user=os.environ.get("PGUSER"), password=os.environ.get("PGPASSWORD"))
    promoted.conn.autocommit = True
    r1.server = r2.server = promoted
    snapshots = dict(promoted.rows("SELECT id::text, coalesce(snapshot_number, 0) FROM sync.replicas"))
    settle(promoted, [r1, r2])
    # a new epoch, or each replica provisioned again: either way a fresh snapshot
    check("the promoted standby notices the replicas are ahead of it: each is provisioned again",
          all(n > snapshots[i] for i, n in promoted.rows("SELECT id::text, snapshot_number FROM sync.replicas")), True)
    same("after failover", promoted, r1)
    same("after failover", promoted, r2)
    check("the write lost at failover is gone from the replicas too",
          r2.one("SELECT name FROM products WHERE id = 6"), promoted.one("SELECT name FROM products WHERE id = 6"))

finally:
    pg(f"/usr/lib/postgresql/15/bin/pg_ctl -D {standby} -w stop -m fast")
# pg_virtualenv stops its cluster itself: start it again for that
subprocess.run(["pg_ctlcluster", "15", os.environ.get("PGCLUSTER", "15/regress").split("/")[-1], "start"],
               check=True, stdout=subprocess.DEVNULL)
finish()
