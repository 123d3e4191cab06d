#!/usr/bin/python3
"""fleet.py - the shop as a fleet deploys it (issue 15): a primary and a
streaming standby (pg_basebackup -R, a second port), pgbouncer in
transaction pooling in front of the primary, TLS everywhere.

  - TLS as users deploy it: a test CA (openssl), the server's certificate
    checked by the agents (sslmode=verify-full), devices authenticated by a
    client certificate (cert in pg_hba.conf) whose CN pg_ident.conf maps to
    the store's role; pgbouncer (run as postgres) takes the same client
    certificates (client_tls_sslmode = verify-full) with the role's password;
  - three agents file through pgbouncer (two server connections for three
    agents: no session state) and pull from the standby; one listens for
    notifications on a direct connection (--listen), the others poll;
  - the standby lags (its replay paused) while the walk goes on: the stores
    are only delayed, never out of order, never provisioned again;
  - the standby is stopped mid-walk: the agents fall back to the next --pull
    (or the primary) and the walk still converges: every store equals its
    wanted set, every sale is at the head office, every answer came back
    and was seen received;
  - an agent through pgbouncer with no --listen still receives a change;
  - the agent as a careful tool: a malformed connection string is exit 64,
    refusals by SQLSTATE are exit 77 (a wrong password, a certificate whose
    CN is another store's), a server certificate from another CA is never
    trusted, --once waits for the server to plan what was committed before
    it started, --json is UTF-8 whatever the file path holds.

FLEET_SEED=n picks the walk; FLEET_STEPS=n its length.  Run by
tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

import psycopg2

import harness
import shopwalk
from harness import check, finish
from shopwalk import AGENT, HeadOffice, Store, Walk

SEED = int(os.environ.get("FLEET_SEED", "15"))
STEPS = int(os.environ.get("FLEET_STEPS", "300"))
DB = "fleet"
STORES = {
    "oslo": ("a1a1a1a1-0000-4000-8000-000000000001", "north"),
    "lisbon": ("b2b2b2b2-0000-4000-8000-000000000002", "south"),
    "porto": ("c3c3c3c3-0000-4000-8000-000000000003", "south"),
}
rng = shopwalk.rng_for(SEED)
tmp = tempfile.mkdtemp(prefix="fleet_e2e.")
os.chmod(tmp, 0o755)
started = time.time()
PORT = os.environ.get("PGPORT", "5432")
BIN = "/usr/lib/postgresql/15/bin"


def log(msg):
    print(f"{time.time() - started:6.1f}s {msg}", flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def as_postgres(cmd):
    sh(["su", "postgres", "-c", cmd], env={**os.environ, "PGPASSWORD": os.environ.get("PGPASSWORD", "")})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, seconds, test):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if test():
                return True
        except Exception:
            pass
        time.sleep(0.1)
    log(f"gave up waiting for {what}")
    return False


# ---- TLS: a test CA, the servers' certificate, the devices' ---------------------

def path(name):
    return os.path.join(tmp, name)


def ca(name, cn):
    sh(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={cn}",
        "-keyout", path(f"{name}.key"), "-out", path(f"{name}.crt")])


def cert(name, cn, ca_name="ca", san=None, owner="root"):
    sh(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
        "-keyout", path(f"{name}.key"), "-out", path(f"{name}.csr")])
    ext = path(f"{name}.ext")
    with open(ext, "w") as f:
        f.write(f"subjectAltName = {san}\n" if san else "basicConstraints = CA:FALSE\n")
    sh(["openssl", "x509", "-req", "-in", path(f"{name}.csr"), "-CA", path(f"{ca_name}.crt"),
        "-CAkey", path(f"{ca_name}.key"), "-CAcreateserial", "-days", "2", "-out", path(f"{name}.crt"),
        "-extfile", ext])
    os.chmod(path(f"{name}.key"), 0o600)
    shutil.chown(path(f"{name}.key"), owner, owner)
    os.chmod(path(f"{name}.crt"), 0o644)


ca("ca", "magic_sync fleet test CA")
ca("other", "a CA nobody trusts")
cert("server", "localhost", san="DNS:localhost,IP:127.0.0.1,IP:::1", owner="postgres")
for name in STORES:
    cert(name, f"{name}.stores.example")
cert("postgres", "postgres")
os.chmod(path("ca.crt"), 0o644)

# ---- the primary: the shop, TLS, cert auth mapped by pg_ident ------------------

roles = {f"store_{n}": f"pw-{n}" for n in STORES}
roles["store_faro"] = "pw-faro"
shopwalk.setup(DB, roles)
ho = HeadOffice(DB)
hba = ho.one("SHOW hba_file")
ident = ho.one("SHOW ident_file")
store_roles = ",".join(sorted(roles))
with open(hba) as f:
    lines = f.read()
with open(hba, "w") as f:
    # devices authenticate by their certificate; pgbouncer's server connections
    # (no TLS) and the tests' own go on with passwords below
    f.write("".join(f"hostssl {DB} {store_roles} {net} cert map=stores\n" for net in ("127.0.0.1/32", "::1/128")))
    f.write(lines)
with open(ident, "a") as f:
    f.write("stores /^([a-z]+)\\.stores\\.example$ store_\\1\n")
for k, v in {"ssl": "on", "ssl_cert_file": path("server.crt"), "ssl_key_file": path("server.key"),
             "ssl_ca_file": path("ca.crt"), "track_functions": "all", "magic_sync.database": DB,
             "magic_sync.naptime": "200", "magic_sync.message_bytes": "4096",
             "wal_level": "replica", "max_wal_senders": "5"}.items():
    ho.exec(f"ALTER SYSTEM SET {k} = '{v}'")
ho.conn.close()
sh(["pg_ctlcluster", os.environ.get("PGVERSION", "15"), "regress", "restart", "-m", "fast"])
ho = HeadOffice(DB)
check("the primary speaks TLS", ho.one("SHOW ssl"), "on")
check("the worker starts", wait_for("the worker", 20, lambda: ho.one(
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'") == 1), True)
for name, (uuid, region) in STORES.items():
    ho.exec("SELECT sync.replica_add(%s, %s, role => %s)", (uuid, region, f"store_{name}"))
porto = STORES["porto"][0]
ho.exec("INSERT INTO stores VALUES (%s, 'Porto', 'south')", (porto,))
ho.exec("INSERT INTO group_stores VALUES ('south', %s), ('club', %s)", (porto, porto))

# ---- a streaming standby on a second port ------------------------------------------

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
            "shared_preload_libraries = 'magic_sync'\nhot_standby = on\n"
            + "".join(f"{g} = {ho.one(f'SHOW {g}')}\n" for g in
                      ("max_connections", "max_worker_processes", "max_wal_senders",
                       "max_prepared_transactions", "max_locks_per_transaction"))
            + f"hba_file = '{hba}'\nident_file = '{ident}'\n")
as_postgres(f"{BIN}/pg_ctl -D {standby} -w -l {path('run')}/standby.log start")


def standby_conn():
    c = psycopg2.connect(dbname=DB, host="localhost", port=standby_port, user=os.environ.get("PGUSER"),
                         password=os.environ.get("PGPASSWORD"), sslmode="disable")
    c.autocommit = True
    return c


def standby_one(sql):
    with standby_conn() as c, c.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def caught_up():
    lsn = ho.one("SELECT pg_current_wal_lsn()::text")
    return wait_for("the standby to replay", 30, lambda: standby_one(
        f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn"))


check("the standby is in recovery", standby_one("SELECT pg_is_in_recovery()"), True)
check("it replays the primary", caught_up(), True)

# ---- pgbouncer in transaction pooling, run as postgres ----------------------------

bouncer_port = free_port()
with open(path("userlist.txt"), "w") as f:
    for role, password in list(roles.items()) + [("postgres", os.environ.get("PGPASSWORD", ""))]:
        f.write(f'"{role}" "{password}"\n')
with open(path("pgbouncer.ini"), "w") as f:
    f.write(f"""[databases]
{DB} = host=127.0.0.1 port={PORT} dbname={DB}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {bouncer_port}
unix_socket_dir =
pool_mode = transaction
; one server backend per role at most, and a backend released is closed two
; seconds after it was made: an agent's statements run on one backend after
; another, so anything one of them kept in its session would be lost
default_pool_size = 1
server_lifetime = 2
max_client_conn = 200
auth_type = scram-sha-256
auth_file = {path("userlist.txt")}
admin_users = postgres
client_tls_sslmode = verify-full
client_tls_ca_file = {path("ca.crt")}
client_tls_cert_file = {path("server.crt")}
client_tls_key_file = {path("server.key")}
ignore_startup_parameters = extra_float_digits
pidfile = {path("run/pgbouncer.pid")}
logfile = {path("run/pgbouncer.log")}
""")
for f in ("userlist.txt", "pgbouncer.ini"):
    shutil.chown(path(f), "postgres", "postgres")
    os.chmod(path(f), 0o600)
as_postgres(f"pgbouncer -d {path('pgbouncer.ini')}")
check("pgbouncer listens", wait_for("pgbouncer", 10, lambda: socket.create_connection(
    ("127.0.0.1", bouncer_port), timeout=1).close() is None), True)


def tls(name, user=None):
    """A device's TLS settings: the server checked against the test CA, its own certificate."""
    return (f"sslmode=verify-full sslrootcert={path('ca.crt')} sslcert={path(name + '.crt')}"
            f" sslkey={path(name + '.key')} user={user or 'store_' + name}")


def through_bouncer(name):
    return f"host=localhost port={bouncer_port} dbname={DB} {tls(name)}"


def direct(name, port=PORT):
    return f"host=localhost port={port} dbname={DB} {tls(name)}"


def bouncer_pools():
    c = psycopg2.connect(dbname="pgbouncer", host="localhost", port=bouncer_port, user="postgres",
                         password=os.environ.get("PGPASSWORD"), sslmode="verify-full",
                         sslrootcert=path("ca.crt"), sslcert=path("postgres.crt"), sslkey=path("postgres.key"))
    c.autocommit = True
    try:
        with c.cursor() as cur:
            cur.execute("SHOW POOLS")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall() if r[0] == DB]
    finally:
        c.close()


# ---- the agent as a careful tool ----------------------------------------------------

def once(args, env=None, timeout=120):
    out = subprocess.run([AGENT, "--once", "--json"] + args, capture_output=True, timeout=timeout,
                         env=env or os.environ)
    return out.returncode, out.stdout


oslo = STORES["oslo"][0]
rc, _ = once(["--server", "hots=localhost dbname=fleet", "--replica", oslo, "--db", path("x.db")])
check("a malformed connection string is a usage error: exit 64", rc, 64)
rc, _ = once(["--server", direct("oslo"), "--pull", "host=localhost prot=1", "--replica", oslo,
              "--db", path("x.db")])
check("so is a malformed --pull", rc, 64)
env = dict(os.environ, PGPASSWORD="wrong", LC_MESSAGES="C")
rc, _ = once(["--server", f"host=localhost port={PORT} dbname={DB} user=store_oslo sslmode=disable",
              "--replica", oslo, "--db", path("pw.db")], env=env)
check("a wrong password is refused by its SQLSTATE (28P01): exit 77", rc, 77)
# pgbouncer 1.18 refuses with its own SQLSTATE, 08P01, for a wrong password as for
# max_client_conn: the agent cannot tell them apart by SQLSTATE, and retries
# (docs/operations.md says so); the bounce must not be taken for a refusal
rc, _ = once(["--server", through_bouncer("oslo"), "--replica", oslo, "--db", path("pwb.db")], env=env)
check("through pgbouncer a wrong password arrives as 08P01, retried: --once exits 69", rc, 69)
rc, _ = once(["--server", f"host=localhost port={PORT} dbname={DB} {tls('lisbon', 'store_oslo')}",
              "--replica", oslo, "--db", path("cn.db")])
check("another store's certificate is refused by its SQLSTATE (28000): exit 77", rc, 77)
rc, _ = once(["--server", f"host=localhost port={PORT} dbname={DB} {tls('oslo')}".replace(
    path("ca.crt"), path("other.crt")), "--replica", oslo, "--db", path("ca.db")])
check("a server certificate the device's CA did not sign is never trusted: exit 69", rc, 69)

# ---- three stores: file through pgbouncer, pull from the standby ------------------

stores = {name: Store(name, uuid, region, tmp, rng) for name, (uuid, region) in STORES.items()}
args = {
    # the one that wants sub-second latency listens on a direct connection
    "oslo": ["--server", through_bouncer("oslo"), "--pull", direct("oslo", standby_port),
             "--listen", direct("oslo") + " application_name=oslo_listen", "--interval", "2000"],
    "lisbon": ["--server", through_bouncer("lisbon"), "--pull", direct("lisbon", standby_port),
               "--interval", "2000"],
    # two to pull from: the standby, then the primary's own port
    "porto": ["--server", through_bouncer("porto"), "--pull", direct("porto", standby_port),
              "--pull", direct("porto"), "--interval", "2000"],
}
for name, s in stores.items():
    s.start(args[name], env=dict(os.environ, PGPASSWORD=roles[f"store_{name}"]))
check("the stores take their snapshots", wait_for("snapshots", 60, lambda: all(
    s.has("products") and s.status()["applied"] > 0 and s.status()["snapshot"] is None
    for s in stores.values())), True)
log("the stores are provisioned through the standby and pgbouncer")

walk = Walk(ho, stores, rng)
lag = {}
pooled = {n: set() for n in stores}
most = {n: 0 for n in stores}


def sample_pooled():
    # pgbouncer's server connections: the stores' backends on the primary without TLS
    seen = {}
    for role, pid in ho.rows("SELECT a.usename, a.pid FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid"
                             " WHERE a.usename LIKE 'store_%%' AND NOT s.ssl"):
        seen.setdefault(role[len("store_"):], set()).add(pid)
    for n, pids in seen.items():
        if n in pooled:
            pooled[n] |= pids
            most[n] = max(most[n], len(pids))


for step in range(STEPS):
    if step % 10 == 0:
        sample_pooled()
    if step == STEPS // 4:
        log("the standby's replay is paused: it lags")
        lag["snapshots"] = dict(ho.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
        standby_one("SELECT pg_wal_replay_pause() IS NULL")
        ho.exec("UPDATE products SET name = 'lagged' WHERE id = 1")
    if step == STEPS // 4 + 40:
        # the head office's change waits on the standby: the stores have not seen it
        lag["seen"] = {n: s.one("SELECT name FROM products WHERE id = 1") for n, s in stores.items()}
        lag["gaps"] = {n: s.status()["gap"] for n, s in stores.items()}
        lag["pools"] = bouncer_pools()
        log(f"pgbouncer's pools: {lag['pools']}")
        lag["snapshots_after"] = dict(ho.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
        log("the standby's replay resumes")
        standby_one("SELECT pg_wal_replay_resume() IS NULL")
    if step == STEPS * 5 // 8:
        lag["standby_pulls"] = standby_one(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'pull'")
        log("the standby stops")
        as_postgres(f"{BIN}/pg_ctl -D {standby} -w stop -m fast")
    walk.step()
    time.sleep(0.03)
log(f"{STEPS} steps walked; sales written: " + ", ".join(f"{n} {len(s.sales)}" for n, s in stores.items()))

check("while the standby lagged, the change was on no store yet", "lagged" in lag["seen"].values(), False)
check("nor did any store stop at a gap", lag["gaps"], {n: 0 for n in stores})
check("nor was any provisioned again for the lag", lag["snapshots_after"], lag["snapshots"])
check("the standby served pulls", lag["standby_pulls"] > 0, True)
check("pgbouncer pools the stores' connections (a pool per role)",
      sorted(p["user"] for p in lag["pools"] if p["user"].startswith("store_")),
      ["store_lisbon", "store_oslo", "store_porto"])
check("one server backend at a time per store, through pgbouncer", most, {n: 1 for n in stores})
check("an agent's statements ran on one backend after another (no session state kept)",
      {n: len(p) > 1 for n, p in pooled.items()}, {n: True for n in stores})

ok = shopwalk.wait_settled(ho, stores, 120)
check("everything settles after the standby stopped", ok, True)
log("settled" if ok else "did not settle")
shopwalk.check_converged(ho, stores)
check("no upload waits in the inbox", ho.one("SELECT count(*) FROM sync.inbox"), 0)
check("every answer was seen received, but each store's newest (an upload that carried nothing)",
      ho.one("SELECT count(*) FROM sync.answers a WHERE received IS NULL AND filed <"
             " (SELECT max(b.filed) FROM sync.answers b WHERE b.replica = a.replica)"), 0)
check("the primary counted the answers the replicas received",
      ho.one("SELECT count(*) > 0 FROM sync.answers WHERE received IS NOT NULL"), True)
events = {n: s.events() for n, s in stores.items()}
check("the agents fell back from the stopped standby",
      all(any(e["event"] == "error" and "standby" in e.get("what", "") for e in ev) for ev in events.values()),
      True)
check("no store stopped at a gap or an older generation",
      [e["stopped"] for ev in events.values() for e in ev if e["event"] == "round" and e["stopped"]], [])
# its listening session's last statement is LISTEN, or a pull once the standby stopped
# (the primary's pulls go on it: src/agent/poll.c)
check("only oslo listens, on its direct connection",
      ho.rows("SELECT a.usename, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid"
              " WHERE a.query = 'LISTEN magic_sync' OR a.application_name = 'oslo_listen'"), [("store_oslo", True)])

# an agent through pgbouncer with no --listen receives a change by polling: of a product
# both polling stores hold (the walk decides which: one of the other region is held only
# while a store's own sales point at it)
both = sorted({r[0] for r in stores["lisbon"].q("SELECT id FROM products")}
              & {r[0] for r in stores["porto"].q("SELECT id FROM products")})
check("lisbon and porto hold a product in common", both != [], True)
polled = both[0] if both else 1
ho.exec("UPDATE products SET name = 'polled' WHERE id = %s", (polled,))
check("lisbon, polling through pgbouncer, receives a change", wait_for(
    "lisbon to poll", 20, lambda: stores["lisbon"].one("SELECT name FROM products WHERE id = ?", (polled,)) == "polled"),
    True)
check("so does porto", wait_for(
    "porto to poll", 20, lambda: stores["porto"].one("SELECT name FROM products WHERE id = ?", (polled,)) == "polled"),
    True)
for name, s in stores.items():
    check(f"{name}'s agent stops cleanly", s.stop(), 0)

# ---- --once waits for what was committed before it started ------------------------

faro = "d4d4d4d4-0000-4000-8000-000000000004"
ho.exec("SELECT sync.replica_add(%s, 'south', role => 'store_faro')", (faro,))
rc, out = once(["--server", f"host=localhost port={bouncer_port} dbname={DB} user=store_faro "
                f"sslmode=verify-full sslrootcert={path('ca.crt')} sslcert={path('lisbon.crt')} "
                f"sslkey={path('lisbon.key')}", "--replica", faro, "--db", path("faro.db")],
               env=dict(os.environ, PGPASSWORD="pw-faro"))
check("--once on a replica just added: exit 0", rc, 0)
faro_store = Store("faro", faro, "south", tmp, rng)
want = {t: k for t, k in ho.rows("SELECT t.name, count(*) FROM sync.wanted(%s) w JOIN sync.tables t"
                                  " ON t.relid = w.tab GROUP BY t.name", (faro,))}
check("--once exited only once its snapshot was planned and applied",
      {t: faro_store.one(f'SELECT count(*) FROM "{t}"') if faro_store.has(t) else 0 for t in want}, want)

# --json is UTF-8 whatever the path holds
bad = os.path.join(tmp.encode(), b"caf\xe9-\xff.db")
rc, out = once(["--server", f"host=localhost port={PORT} dbname={DB} user=store_faro sslmode=disable",
                "--replica", faro, "--db", bad], env=dict(os.environ, PGPASSWORD="pw-faro"))
lines = out.split(b"\n")
valid = []
for line in lines:
    if line:
        try:
            valid.append(json.loads(line.decode("utf-8")))
        except ValueError:
            valid.append(None)
check("--json on a path that is not UTF-8: every line is UTF-8 JSON", None in valid or not valid, False)
check("the path is shown with U+FFFD", any(e and e.get("event") == "start" and "\ufffd" in e["db"] for e in valid),
      True)

as_postgres(f"kill $(cat {path('run/pgbouncer.pid')})")
log(f"seed {SEED}, {STEPS} steps")
if harness.failed:
    print(f"the agents' logs and the stores' files are kept in {tmp}")
else:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
