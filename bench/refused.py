#!/usr/bin/python3
"""What rows refused cost the relay (issues 19.6, 38.2).  Not a test: prints figures.

200 replicas, 1,000 products broadcast, every replica provisioned.  Median
CPU time of the backend running sync.relay_pass() (its commit included,
read from /proc/PID/schedstat: wall time on a shared machine is its load) of:
  idle      a pass with no note
  change    a one-row change, sent to every replica
each with no row refused, then with R rows refused (spread over the replicas,
none due: the wait of a minute); then the pass that sends R rows refused,
all due, to their replicas again.

One replica refusing many rows (issue 38.2): replica 1 alone is assigned a
table of ONE (60,000) rows, and refuses every one of them through sync.file,
as a buggy app build refusing a big table does.  The statistics of sync.held
are those from before the refusals (autovacuum off for it, as after
a burst of refusals).  The other replicas' passes, idle and change, against
the same passes before the refusals (target: <= 1.2 times):
  none due  its ONE refused rows waiting their minute
  attack    before every pass it files an upload refusing them all again
            and saying a new build (a new build makes them due at once, at
            most once in ten minutes per replica): the median of the passes
            that did not send replica 1 its rows again, and how many took
            over 1.2 times the median before; then the passes that did (the
            first new build, and a minute after each refusal, doubling: on
            a loaded machine the attack lasts minutes)
and the one pass that sends them all again, at ONE / 4 and at ONE rows due:
linear, the second takes about 4 times the first (before issue 38.2: 15,005
due took 18 s, 60,000 did not finish in 9 minutes).

Times are CPU milliseconds; the load average is printed beside them.

  bench/run refused.py [--refused R] [--passes P] [--one ONE] [--no-spread]
"""
import os
import statistics
import sys
import time
import uuid

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import wire  # noqa: E402  (uploads by hand, docs/protocol.md 7)

args = sys.argv[1:]
REPLICAS = 200
REFUSED = 10_000
PASSES = 21
ONE = 60_000
if "--refused" in args:
    REFUSED = int(args[args.index("--refused") + 1])
if "--passes" in args:
    PASSES = int(args[args.index("--passes") + 1])
if "--one" in args:
    ONE = int(args[args.index("--one") + 1])
if "--no-spread" in args:
    REFUSED = 0
ids = [str(uuid.UUID(int=i + 1)) for i in range(REPLICAS)]


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


def cpu_ns(pid):
    """the CPU time a backend has run, in nanoseconds (the scheduler's count: wall time is the
    machine's load as much as the pass's)"""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def timed(cur, sql, args=None):
    """the CPU seconds of the backend running sql"""
    pid = cur.connection.get_backend_pid()
    t = cpu_ns(pid)
    cur.execute(sql, args)
    return (cpu_ns(pid) - t) / 1e9


def acked(cur):
    """every replica applied what it was sent, as their agents would say"""
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("DELETE FROM sync.outbox")


def passes(cur, change, before=None, n=PASSES, sent=None):
    """n idle passes and n one-row changes (their CPU ms); before(i) runs before each pass;
    sent, a list, is given each pass's (kind, rows sent, CPU ms)"""
    idle, changed = [], []
    for i in range(n):
        if before:
            before(2 * i)
        idle.append(timed(cur, "SELECT rows_sent FROM sync.relay_pass()") * 1000)
        if sent is not None:
            sent.append(("idle", cur.fetchone()[0], idle[-1]))
        acked(cur)
        if change:
            if before:
                before(2 * i + 1)
            cur.execute("UPDATE products SET price = price + 1 WHERE id = %s", (1 + i % 1000,))
            changed.append(timed(cur, "SELECT rows_sent FROM sync.relay_pass()") * 1000)
            if sent is not None:
                sent.append(("change", cur.fetchone()[0], changed[-1]))
            acked(cur)
    return idle, changed


def fleet(cur, stock=0):
    """REPLICAS replicas provisioned with 1,000 products; replica 1 alone with stock rows"""
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("DROP TABLE IF EXISTS products, stock CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric NOT NULL)")
    cur.execute("INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, 1000) g")
    cur.execute("SELECT sync.mirror('products', 'catalog', 'broadcast')")
    if stock:
        cur.execute("CREATE TABLE stock (id int PRIMARY KEY, store uuid NOT NULL, qty int NOT NULL)")
        cur.execute("INSERT INTO stock SELECT g, %s, g FROM generate_series(1, %s) g", (ids[0], stock))
        cur.execute("SELECT sync.mirror('stock', 'catalog', 'assigned(store)')")
    for r in ids:
        cur.execute("SELECT sync.replica_add(%s)", (r,))
    cur.execute("SELECT * FROM sync.relay_pass()")
    acked(cur)
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.notes")


conn = connect()
cur = conn.cursor()
print("load average %.2f %.2f %.2f" % os.getloadavg())

if REFUSED:
    fleet(cur)
    print(f"{REPLICAS} replicas, 1,000 products broadcast, median of {PASSES} passes each")
    idle, change = map(statistics.median, passes(cur, True))
    print(f"  no row refused:          idle pass {idle:6.2f} ms   one-row change {change:6.2f} ms")
    # refusals as sync.file records them: the held row marked, its count and due time
    cur.execute("""
    WITH r AS (SELECT h.* FROM sync.held h
                WHERE (hashtext(h.replica::text || h.key) & 2147483647) %% (%s * 1000 / %s) = 0 LIMIT %s)
    , u AS (UPDATE sync.held h SET refused = 'a bench' FROM r
             WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key)
    INSERT INTO sync.refused_rows (replica, tab, key, note, due)
    SELECT replica, tab, key, note, now() + interval '1 minute' FROM r""", (REPLICAS, max(REFUSED, 1), REFUSED))
    cur.execute("SELECT count(*) FROM sync.refused_rows")
    n = cur.fetchone()[0]
    cur.execute("VACUUM ANALYZE sync.held, sync.refused_rows")
    idle, change = map(statistics.median, passes(cur, True))
    print(f"  {n:,} refused, none due: idle pass {idle:6.2f} ms   one-row change {change:6.2f} ms")
    cur.execute("UPDATE sync.refused_rows SET due = now() - interval '1 second'")
    took = timed(cur, "SELECT rows_sent, messages FROM sync.relay_pass()")
    sent, messages = cur.fetchone()
    print(f"  all {n:,} due: one pass sends {sent:,} rows in {messages:,} messages to their replicas"
          f" in {took * 1000:.0f} ms")
    cur.execute("SELECT count(*) FILTER (WHERE due IS NULL), count(*) FILTER (WHERE due IS NOT NULL),"
                " (SELECT count(*) FROM sync.held WHERE refused IS NOT NULL) FROM sync.refused_rows")
    print("  after it: sent and awaited, still due, held still refused:", cur.fetchone(),
          "(rows a change sent meanwhile went at once: their counts are over)")

if ONE:
    refusals = {}

    def refusing(keys, build):
        """replica 1's upload refusing stock rows keys, saying build (Up field 14); the
        refusals made once (joined, not added to: bytes += is quadratic)"""
        if tuple(keys) not in refusals:
            refusals[tuple(keys)] = b"".join(
                wire.field(6, wire.field(1, "stock") + wire.field(2, wire.key([k]))
                           + wire.field(3, "the app's trigger refused it")) for k in keys)
        body = b"".join((wire.field(1, 1), wire.field(2, uuid.UUID(ids[0]).bytes), wire.field(3, os.urandom(16)),
                         refusals[tuple(keys)], wire.field(11, wire.now_seq()), wire.field(14, build)))
        return psycopg2.Binary(wire.checked(body))

    def refuse(keys, build):
        return timed(cur, "SELECT sync.file(%s, %s)", (ids[0], refusing(keys, build)))

    def settled():
        """sync.replicas and sync.outbox vacuumed (not sync.held, nor sync.refused_rows): the
        bench's own acknowledgements rewrite every replica's row twice a pass, and a table
        of 200 rows read through 40 versions of each made the passes after dearer than those
        before, whatever was refused (their lookups of sync.replicas read 2.4 times the pages)"""
        cur.execute("VACUUM sync.replicas, sync.outbox")

    fleet(cur, ONE)
    print(f"\n{REPLICAS} replicas, 1,000 products broadcast; replica 1 alone holds {ONE:,} stock rows;"
          f" {PASSES} passes each")
    settled()
    base_idle, base_change = passes(cur, True)
    bi, bc = statistics.median(base_idle), statistics.median(base_change)
    print(f"  none refused:            idle pass {bi:7.2f} ms   one-row change {bc:7.2f} ms")
    # the statistics of sync.held stay as they were before the refusals
    cur.execute("ALTER TABLE sync.held SET (autovacuum_enabled = false)")
    keys = list(range(1, ONE + 1))
    refuse([], "b0")   # its build, said before it refuses anything: its first says no change
    took = refuse(keys, "b0")
    cur.execute("SELECT count(*) FROM sync.refused_rows WHERE replica = %s", (ids[0],))
    print(f"  replica 1 files an upload refusing {cur.fetchone()[0]:,} rows in {took:.1f} s of CPU (its own cost)")
    settled()
    idle, change = passes(cur, True)
    i, c = statistics.median(idle), statistics.median(change)
    print(f"  {ONE:,} refused, none due: idle pass {i:7.2f} ms ({i / bi:.2f}x)"
          f"   one-row change {c:7.2f} ms ({c / bc:.2f}x)")
    filed = []

    def attack(i):
        filed.append(refuse(keys, f"b{i + 1}"))

    sent = []
    settled()
    began = time.monotonic()
    passes(cur, True, attack, sent=sent)
    took = time.monotonic() - began
    # the passes that sent replica 1 its refused rows again, and the others: the other replicas' passes
    retries = [x for x in sent if x[1] >= ONE // 2]
    others = {k: [ms for kind, rows, ms in sent if kind == k and rows < ONE // 2] for k in ("idle", "change")}
    i, c = statistics.median(others["idle"]), statistics.median(others["change"])
    slow = sum(1 for ms in others["idle"] if ms > 1.2 * bi) + sum(1 for ms in others["change"] if ms > 1.2 * bc)
    print(f"  attack, a new build refusing them all before every pass ({len(sent)} passes in {took:.0f} s):")
    print(f"    other replicas' passes: idle {i:7.2f} ms ({i / bi:.2f}x)   one-row change {c:7.2f} ms ({c / bc:.2f}x);"
          f" {slow} of {len(sent) - len(retries)} over 1.2 times the median before")
    print(f"    passes sending replica 1 its {ONE:,} rows again: {len(retries)}"
          f" ({', '.join(f'{ms:.0f} ms' for _, _, ms in retries)}): the first new build at once,"
          f" then a minute after each refusal, doubling (the builds after the first, within ten minutes, make"
          f" none due); its uploads took {statistics.median(filed):.1f} s of CPU each (median)")
    cur.execute("SELECT count(*) FILTER (WHERE due <= now()), count(*) FILTER (WHERE due > now()),"
                " count(*) FILTER (WHERE due IS NULL) FROM sync.refused_rows")
    print("    after it: refused rows due, waiting, sent and awaited:", cur.fetchone())

    # the pass that sends them again, at ONE / 4 and at ONE rows due
    def due(n):
        refuse(keys, f"b{PASSES * 2 + 1}")
        cur.execute("UPDATE sync.refused_rows r SET due = now() - interval '1 second'"
                    "  FROM sync.tables t WHERE t.id = r.tab AND t.name = 'stock'"
                    "   AND (sync.key_parts(r.key))[1]::int <= %s", (n,))
        took = timed(cur, "SELECT rows_sent FROM sync.relay_pass()") * 1000
        sent = cur.fetchone()[0]
        acked(cur)
        return sent, took

    q_sent, q = due(ONE // 4)
    a_sent, a = due(ONE)
    print(f"  one pass sends {q_sent:,} refused rows due in {q:.0f} ms, {a_sent:,} in {a:.0f} ms:"
          f" {a / q:.1f} times for {a_sent / max(q_sent, 1):.1f} times the rows (linear: about as many)")
print("load average %.2f %.2f %.2f" % os.getloadavg())
conn.close()
