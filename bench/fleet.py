#!/usr/bin/python3
"""Fleet benchmark (issue 15).  Not a test: prints figures, and the ratios
they are judged by, measured in the same run.

  10,000 replicas (FLEET_REPLICAS) registered and provisioned with a small
  catalog (50 broadcast rows); simulated devices -- asyncio and asyncpg,
  each device a replica that pulls with what it applied (its claim) and
  files its acknowledgements as the agent does -- poll through pgbouncer in
  transaction pooling at FLEET_RATE (1,000) polls/s for FLEET_SECONDS (60):

  poll latency        p50 / p99 of a caught-up poll, through pgbouncer
  primary CPU         CPU seconds of the primary's processes per 1,000
                      caught-up polls, with the pulls on the primary, then
                      on a streaming standby: target, the primary's CPU for
                      pulls falls >= 5x when the standby serves them
  backends            the primary's client backends in use (target <= 50 for
                      10,000 devices): pgbouncer's pool, not one per device
  explain             the plan of a caught-up poll's statements: index probes
  broadcast           one changed broadcast row to every replica: the relay
                      pass's time, then the time until every simulated
                      device pulled it (and filed its acknowledgement)
  reads               sync.overview and sync.health at 10,000 replicas
  held                what each device costs in sync.held: rows and bytes

Every device logs in to pgbouncer as one role, fleet_pool, which every
replica is registered with (docs/scale.md says why: pgbouncer pools server
connections per role).  FLEET_CLIENTS (500) client connections carry the
devices' polls, as many devices each.

Run through bench/run (a throw-away cluster; it needs pgbouncer and
python3-asyncpg, scripts/install-deps):
  bench/run fleet.py
"""
import asyncio
import hashlib
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import asyncpg
import psycopg2

REPLICAS = int(os.environ.get("FLEET_REPLICAS", "10000"))
RATE = int(os.environ.get("FLEET_RATE", "1000"))
SECONDS = int(os.environ.get("FLEET_SECONDS", "60"))
CLIENTS = int(os.environ.get("FLEET_CLIENTS", "500"))
ROWS = 50
DB = "fleet"
BIN = "/usr/lib/postgresql/15/bin"
PORT = os.environ.get("PGPORT", "5432")
tmp = tempfile.mkdtemp(prefix="fleet_bench.")
os.chmod(tmp, 0o755)
shutil.chown(tmp, "postgres", "postgres")  # pgbouncer and the standby run as postgres, and write here
TICK = os.sysconf("SC_CLK_TCK")


def say(msg):
    print(msg, flush=True)


def sh(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def as_postgres(cmd):
    subprocess.run(["su", "postgres", "-c", cmd], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=os.environ)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port=PORT, dbname=DB):
    c = psycopg2.connect(dbname=dbname, host="localhost", port=port, user=os.environ.get("PGUSER"),
                         password=os.environ.get("PGPASSWORD"))
    c.autocommit = True
    return c


def one(c, sql, args=None):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0] if cur.description else None


def rows(c, sql, args=None):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def relay(c):
    with c.cursor() as cur:
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT * FROM sync.relay_pass()")
        r = cur.fetchone()
        cur.execute("COMMIT")
        return r


def cpu_seconds(datadir):
    """CPU of a cluster: its postmaster and every process it started, as they are now."""
    with open(os.path.join(datadir, "postmaster.pid")) as f:
        pm = int(f.readline())
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == pm or int(fields[1]) == pm:
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def pid_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


# ---- protobuf, as much as a device needs (docs/protocol.md) ---------------------

def varint(n):
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def pb_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def pb_int(field, n):
    return varint(field << 3) + varint(n) if n else b""


def fields(m):
    """The top-level fields of a message: {number: value (int or bytes)}."""
    out, pos = {}, 0
    while pos < len(m):
        tag, shift = 0, 0
        while True:
            b = m[pos]
            pos += 1
            tag |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        kind, field = tag & 7, tag >> 3
        if kind == 0:
            v, shift = 0, 0
            while True:
                b = m[pos]
                pos += 1
                v |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            out[field] = v
        elif kind == 2:
            n, shift = 0, 0
            while True:
                b = m[pos]
                pos += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
            out[field] = m[pos:pos + n]
            pos += n
        elif kind == 1:
            pos += 8
        elif kind == 5:
            pos += 4
        else:
            raise ValueError("unknown wire type")
    return out


class Device:
    """A replica as its agent runs it, without a file: what it applied, and its claim."""

    __slots__ = ("id", "raw", "applied", "claim", "got_at", "seq")

    def __init__(self, rid):
        self.id = rid
        self.raw = uuid.UUID(rid).bytes
        self.applied = 0
        self.claim = b""
        self.got_at = None
        self.seq = 0

    def take(self, message):
        """Apply a message's head: it follows what it applied (the chain is the server's)."""
        f = fields(bytes(message))
        self.applied = f.get(3, 0)
        self.claim = (pb_bytes(1, f[2]) + pb_int(2, f[3]) + pb_bytes(3, f[4]) + pb_bytes(4, f[7])
                      + pb_int(5, f.get(12, 0)))

    def up(self):
        """An Up acknowledging what it applied, nothing else to say, framed as
        docs/protocol.md says: its length first, numbered, its SHA-256 check last."""
        self.seq = max(self.seq + 1, time.time_ns() // 1000)
        body = (pb_int(1, 1) + pb_bytes(2, self.raw) + pb_bytes(3, os.urandom(16))
                + pb_bytes(4, self.claim) + pb_int(11, self.seq))
        head = b"\x61" + struct.pack("<Q", 9 + len(body) + 34) + body
        return head + b"\x6a\x20" + hashlib.sha256(head).digest()


PULL = "SELECT number, message FROM sync.pull($1::uuid, $2::bigint, $3::int, $4::bytea)"
FILE = "SELECT sync.file($1::uuid, $2::bytea)"


async def catch_up(conn, d, files=None):
    """Pull everything waiting, apply its heads, acknowledge (on the primary: files): as the agent's pass does."""
    moved = False
    while True:
        got = await conn.fetch(PULL, d.id, d.applied, 4 << 20, d.claim)
        chained = [r for r in got if r["number"] is not None]
        for r in chained:
            d.take(r["message"])
        if not chained:
            break
        moved = True
        await (files or conn).fetchval(FILE, d.id, d.up())
    return moved


async def open_clients(port, dbname, n):
    # statement_cache_size=0: no named statement outlives its transaction (pgbouncer)
    return await asyncio.gather(*[asyncpg.connect(host="127.0.0.1", port=port, user="fleet_pool",
                                                  password="pw-pool", database=dbname,
                                                  statement_cache_size=0) for _ in range(n)])


async def provision_all(port, dbname, devices):
    clients = await open_clients(port, dbname, min(CLIENTS, 100))
    queue = asyncio.Queue()
    for d in devices:
        queue.put_nowait(d)

    async def work(conn):
        while not queue.empty():
            d = queue.get_nowait()
            await catch_up(conn, d)
    await asyncio.gather(*[work(c) for c in clients])
    for c in clients:
        await c.close()


load_started = [0.0]  # when the last poll load's first poll was due (its connections open)


async def poll_load(port, dbname, devices, seconds, rate, sample):
    """Devices poll on a schedule: rate polls/s over the fleet, for seconds; they file on the primary.
    Latencies in ms."""
    clients = await open_clients(port, dbname, CLIENTS)
    files = clients if dbname == DB else await open_clients(port, DB, CLIENTS)
    queue = asyncio.Queue()
    lat = []
    moved = [0]
    period = len(devices) / rate
    start = time.monotonic()
    end = start + seconds

    async def dispatch():
        # each device polls once every `period`, the fleet spread over it
        order = devices[:]
        random.shuffle(order)
        i = 0
        while True:
            due = start + (i / rate)
            if due >= end:
                break
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            queue.put_nowait((due, order[i % len(order)]))
            i += 1
        for _ in clients:
            queue.put_nowait(None)

    async def work(i, conn):
        while True:
            item = await queue.get()
            if item is None:
                return
            due, d = item
            t = time.monotonic()
            if await catch_up(conn, d, files[i]):
                moved[0] += 1
                if d.got_at is None:
                    d.got_at = time.monotonic()
            lat.append((time.monotonic() - t) * 1000)

    sampler = asyncio.ensure_future(sample())
    await asyncio.gather(dispatch(), *[work(i, c) for i, c in enumerate(clients)])
    sampler.cancel()
    for c in set(clients) | set(files):
        await c.close()
    load_started[0] = start
    return lat, moved[0], time.monotonic() - start, period


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")


def main():
    random.seed(15)
    say(f"fleet: {REPLICAS} replicas, {ROWS} broadcast rows, {RATE} polls/s for {SECONDS} s, "
        f"{CLIENTS} client connections to pgbouncer")
    admin = connect(dbname="postgres")
    for sql in (f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}",
                "DROP ROLE IF EXISTS fleet_pool", "CREATE ROLE fleet_pool LOGIN PASSWORD 'pw-pool'",
                "ALTER SYSTEM SET track_functions = 'all'", "ALTER SYSTEM SET max_connections = 200",
                "ALTER SYSTEM SET wal_level = 'replica'"):
        one(admin, sql)
    admin.close()
    sh(["pg_ctlcluster", os.environ.get("PGVERSION", "15"), "regress", "restart", "-m", "fast"])
    c = connect()
    datadir = one(c, "SHOW data_directory")
    for sql in ("CREATE EXTENSION magic_sync",
                "CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)",
                "SELECT sync.mirror('products', 'catalog', 'broadcast')",
                f"INSERT INTO products SELECT g, 'product ' || g, g FROM generate_series(1, {ROWS}) g"):
        one(c, sql)
    ids = [str(uuid.UUID(int=(0xF1EE7 << 96) | i)) for i in range(1, REPLICAS + 1)]
    t = time.monotonic()
    one(c, "SELECT count(sync.replica_add(r, role => 'fleet_pool')) FROM unnest(%s::uuid[]) r", (ids,))
    say(f"  registered {REPLICAS} replicas in {time.monotonic() - t:.1f} s")
    t = time.monotonic()
    passes = 0
    while one(c, "SELECT count(*) FROM sync.replicas WHERE provision OR NOT seen_live") > 0 and passes < 50:
        relay(c)
        passes += 1
    say(f"  provisioned them in {passes} relay passes, {time.monotonic() - t:.1f} s")

    # pgbouncer in front of the primary (and, later, of the standby)
    standby_port = free_port()
    bouncer_port = free_port()
    with open(os.path.join(tmp, "userlist.txt"), "w") as f:
        f.write('"fleet_pool" "pw-pool"\n')
    with open(os.path.join(tmp, "pgbouncer.ini"), "w") as f:
        f.write(f"""[databases]
{DB} = host=127.0.0.1 port={PORT} dbname={DB}
{DB}_standby = host=127.0.0.1 port={standby_port} dbname={DB}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {bouncer_port}
unix_socket_dir =
pool_mode = transaction
default_pool_size = 20
max_db_connections = 40
max_client_conn = {CLIENTS * 2 + 100}
auth_type = scram-sha-256
auth_file = {tmp}/userlist.txt
ignore_startup_parameters = extra_float_digits
pidfile = {tmp}/pgbouncer.pid
logfile = {tmp}/pgbouncer.log
""")
    for name in ("userlist.txt", "pgbouncer.ini"):
        shutil.chown(os.path.join(tmp, name), "postgres", "postgres")
    as_postgres(f"ulimit -n 8192; pgbouncer -d {tmp}/pgbouncer.ini")
    for _ in range(50):
        if os.path.exists(f"{tmp}/pgbouncer.pid"):
            break
        time.sleep(0.1)
    with open(f"{tmp}/pgbouncer.pid") as f:
        bouncer_pid = int(f.read())

    devices = [Device(r) for r in ids]
    t = time.monotonic()
    asyncio.run(provision_all(bouncer_port, DB, devices))
    say(f"  every device pulled and acknowledged its snapshot in {time.monotonic() - t:.1f} s")
    relay(c)
    caught = one(c, "SELECT count(*) FROM sync.replicas WHERE acked_number = last_number AND NOT provision")
    say(f"  caught up: {caught} of {REPLICAS}")

    # a pass with nothing to do: what remains O(replicas) in a pass shows here
    t = time.monotonic()
    for _ in range(5):
        relay(c)
    say(f"idle pass at {REPLICAS} replicas (nothing noted): {(time.monotonic() - t) / 5 * 1000:.1f} ms")

    # what each device costs in sync.held, and the reads at this size
    held = one(c, "SELECT count(*) FROM sync.held")
    held_bytes = one(c, "SELECT pg_total_relation_size('sync.held')")
    say(f"held: {held} rows, {held_bytes / held:.0f} bytes a row with its indexes, "
        f"{held_bytes / REPLICAS / 1024:.1f} kB a device")
    for name, sql in (("sync.overview()", "SELECT sync.overview()"),
                      ("sync.health()", "SELECT count(*) FROM sync.health()"),
                      ("sync.listing(limit 100)", "SELECT count(*) FROM sync.listing()")):
        one(c, sql)
        t = time.monotonic()
        for _ in range(3):
            one(c, sql)
        say(f"read {name} at {REPLICAS} replicas: {(time.monotonic() - t) / 3 * 1000:.0f} ms")

    # a caught-up poll's statements, as sync.pull runs them (auto_explain of
    # the statements it runs through SPI): index probes, a few buffers each
    d = devices[0]
    one(c, "LOAD 'auto_explain'")
    for sql in ("SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_buffers = on", "SET auto_explain.log_timing = off",
                "SET auto_explain.log_nested_statements = on", "SET client_min_messages = log"):
        one(c, sql)
    del c.notices[:]
    rows(c, "SELECT number FROM sync.pull(%s, %s, 4194304, %s)", (d.id, d.applied, d.claim))
    one(c, "SET client_min_messages = notice")
    one(c, "SET auto_explain.log_min_duration = -1")
    for n in c.notices:
        text = n.split("plan:", 1)[-1]
        query = " ".join(text.split("\n", 2)[1].split())[len("Query Text: "):][:70]
        nodes = [ln.strip().split("  (")[0].lstrip("-> ") for ln in text.split("\n")
                 if "(actual" in ln or "(never executed)" in ln]
        # the top node's buffers count its children's
        top = next((ln for ln in text.split("\n") if "Buffers:" in ln), "")
        hits = sum(int(x.split("=")[1]) for x in top.replace(",", " ").split() if x.startswith(("hit=", "read=")))
        say(f"explain a caught-up pull: {query}: " + " / ".join(nodes) + f" ({hits} buffers)")

    # the poll load: pulls on the primary, then on a standby
    peak = {"backends": 0}

    def sampler(port):
        async def sample():
            s = await asyncpg.connect(host="127.0.0.1", port=port, user=os.environ.get("PGUSER"),
                                      password=os.environ.get("PGPASSWORD"), database=DB)
            try:
                while True:
                    n = await s.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                                         " AND usename = 'fleet_pool'")
                    peak["backends"] = max(peak["backends"], n)
                    await asyncio.sleep(0.5)
            finally:
                await s.close()
        return sample

    results = {}
    polls = {}
    for where in ("primary", "standby"):
        if where == "standby":
            as_postgres(f"pg_basebackup -h localhost -p {PORT} -U {os.environ.get('PGUSER', 'postgres')}"
                        f" -D {tmp}/standby -R -X stream -c fast")
            with open(f"{tmp}/standby/postgresql.conf", "w") as f:
                f.write(f"port = {standby_port}\nlisten_addresses = 'localhost'\nunix_socket_directories = '{tmp}'\n"
                        "shared_preload_libraries = 'magic_sync'\nhot_standby = on\nmax_connections = 200\n"
                        "max_worker_processes = 16\n"
                        f"hba_file = '{one(c, 'SHOW hba_file')}'\n")
            as_postgres(f"{BIN}/pg_ctl -D {tmp}/standby -w -l {tmp}/standby.log start")
        dbname = DB if where == "primary" else f"{DB}_standby"
        peak["backends"] = 0
        cpu0, b0 = cpu_seconds(datadir), pid_cpu(bouncer_pid)
        s0 = cpu_seconds(f"{tmp}/standby") if where == "standby" else 0
        lat, moved, took, period = asyncio.run(poll_load(bouncer_port, dbname, devices, SECONDS, RATE,
                                                         sampler(PORT if where == "primary" else standby_port)))
        cpu1, b1 = cpu_seconds(datadir), pid_cpu(bouncer_pid)
        s1 = cpu_seconds(f"{tmp}/standby") if where == "standby" else 0
        n = len(lat)
        results[where] = (cpu1 - cpu0) / n * 1000
        polls[where] = n
        say(f"polls with pulls on the {where}: {n} in {took:.1f} s ({n / took:.0f}/s, each device every"
            f" {period:.1f} s), p50 {pct(lat, 0.5):.2f} ms, p99 {pct(lat, 0.99):.2f} ms; primary CPU"
            f" {results[where]:.3f} s per 1,000 polls" + (f", standby CPU {(s1 - s0) / n * 1000:.3f} s" if where ==
                                                           "standby" else "")
            + f", pgbouncer {(b1 - b0) / n * 1000:.3f} s; peak backends {peak['backends']}; {moved} moved")
    # /proc counts CPU in ticks: a primary that spent none is below one tick over the run
    floor = 1 / TICK / max(polls["standby"], 1) * 1000
    if results["standby"] > 0:
        ratio = f"{results['primary'] / results['standby']:.1f}"
    else:
        ratio = f"> {results['primary'] / floor:.0f} (the primary spent less than one tick, 1/{TICK} s, over the run)"
    say(f"ratio: primary CPU per 1,000 polls, pulls on the primary / on the standby: {ratio} (target >= 5)")
    say(f"backends: peak {peak['backends']} on the serving server for {REPLICAS} devices (target <= 50)")

    # one broadcast change to every replica
    one(c, "UPDATE products SET price = price + 1 WHERE id = 1")
    t = time.monotonic()
    r = relay(c)
    say(f"broadcast: one changed row, a pass of {time.monotonic() - t:.2f} s writing {r[5]} messages")
    for d in devices:
        d.got_at = None
    t0 = time.monotonic()
    lat, moved, took, period = asyncio.run(poll_load(bouncer_port, f"{DB}_standby", devices,
                                                     max(2 * REPLICAS / RATE, 5), RATE, sampler(standby_port)))
    got = [d.got_at - t0 for d in devices if d.got_at is not None]
    say(f"broadcast: {len(got)} of {REPLICAS} devices pulled it (from the standby) and acknowledged it;"
        f" the last {max(got) if got else float('nan'):.1f} s after the pass,"
        f" {max(got) - (load_started[0] - t0) if got else float('nan'):.1f} s after the devices began polling"
        f" ({load_started[0] - t0:.1f} s to open their connections)"
        f" (devices poll every {period:.1f} s); p50 poll then {pct(lat, 0.5):.2f} ms, p99 {pct(lat, 0.99):.2f} ms")
    acked = one(c, "SELECT count(*) FROM sync.replicas WHERE acked_number = last_number")
    say(f"broadcast: the primary records {acked} of {REPLICAS} acknowledged")

    as_postgres(f"kill {bouncer_pid}")
    as_postgres(f"{BIN}/pg_ctl -D {tmp}/standby -w stop -m fast")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
