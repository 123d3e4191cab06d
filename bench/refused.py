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
as a buggy app build refusing a big table does.  Two such fleets, each in a
database of its own: in the first replica 1 refuses, in the second (the
fleet beside) it refuses nothing.  Their passes alternate (which goes first
too), each fleet's in its relay's own session, and each replica 1 files in a
session of its own, as replicas do: whatever the machine runs meanwhile --
the attacker's uploads, the autovacuum and WAL they cause, other work --
weighs on both fleets' passes alike, and the ratio of the attacked fleet's
other passes to those beside at the same time is the work the attack adds
to them (target: <= 1.2; the two fleets before any refusal give the ratio's
own spread).  The statistics of sync.held are those from before the
refusals (autovacuum off for it, as after a burst of refusals).  Idle passes
and one-row changes:
  none due  its ONE refused rows waiting their minute
  attack    before every pass it files an upload refusing them all again
            and saying a new build (a new build makes them due at once, at
            most once in ten minutes per replica): the passes that did not
            send replica 1 its rows again, and how many pairs took over 1.2
            times the pass beside; then the passes that did (the first new
            build, and a minute after each refusal, doubling: on a loaded
            machine the attack lasts minutes), and the attacker's uploads'
            own CPU
and the one pass that sends them all again, at ONE / 4 and at ONE rows due:
linear, the second takes about 4 times the first (before issue 38.2: 15,005
due took 18 s, 60,000 did not finish in 9 minutes).  The JUDGED line is the
figure the target is read by.

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


def connect(db=None):
    c = psycopg2.connect(dbname=db or os.environ.get("PGDATABASE", "postgres"))
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

    def settled(c):
        """sync.replicas and sync.outbox vacuumed (not sync.held, nor sync.refused_rows): the
        bench's own acknowledgements rewrite every replica's row twice a pass, and a table
        of 200 rows read through 40 versions of each made the passes after dearer than those
        before, whatever was refused (their lookups of sync.replicas read 2.4 times the pages)"""
        c.execute("VACUUM sync.replicas, sync.outbox")

    # Two fleets alike, each in a database of its own: replica 1 of the first refuses its rows
    # (the attack), that of the second refuses none (the fleet beside).  Their passes alternate,
    # each fleet's in its relay's session, and each replica 1 files in a session of its own, as
    # replicas do: what the machine runs meanwhile (the attacker's uploads, the autovacuum and
    # WAL they cause, other work) weighs on both fleets' passes alike, and the ratio of the
    # attacked fleet's passes to those beside is the work the attack adds to them.
    cur.execute("DROP DATABASE IF EXISTS refused_beside")
    cur.execute("CREATE DATABASE refused_beside")
    cur_b = connect("refused_beside").cursor()
    att = connect().cursor()                        # replica 1 of the attacked fleet
    att_b = connect("refused_beside").cursor()      # replica 1 beside, refusing nothing
    for c in (cur, cur_b):
        fleet(c, ONE)
        # the statistics of sync.held stay as they were before the refusals
        c.execute("ALTER TABLE sync.held SET (autovacuum_enabled = false)")
    print(f"\n{REPLICAS} replicas, 1,000 products broadcast; replica 1 alone holds {ONE:,} stock rows;"
          f" two such fleets, their passes alternating, {PASSES} of each kind")

    keys = list(range(1, ONE + 1))

    def refuse(keys, build):
        return timed(att, "SELECT sync.file(%s, %s)", (ids[0], refusing(keys, build)))

    def one(c, kind, i):
        """one pass of c's fleet, idle or after a one-row change: (rows sent, CPU ms)"""
        if kind == "change":
            c.execute("UPDATE products SET price = price + 1 WHERE id = %s", (1 + i % 1000,))
        ms = timed(c, "SELECT rows_sent FROM sync.relay_pass()") * 1000
        rows = c.fetchone()[0]
        acked(c)
        return rows, ms

    def alternating(attack=None, beside=None):
        """PASSES idle passes and one-row changes of each fleet, alternating (which fleet goes
        first too); attack(j) before the attacked fleet's j-th pass, beside(j) before the one
        beside's: [(kind, rows the attacked fleet's pass sent, its CPU ms, the pass beside's)]"""
        settled(cur)
        settled(cur_b)
        out = []
        for j in range(2 * PASSES):
            kind = ("idle", "change")[j % 2]
            got = {}
            for c, before in [(cur, attack), (cur_b, beside)][::1 if j % 4 < 2 else -1]:
                if before:
                    before(j)
                got[c] = one(c, kind, j // 2)
            out.append((kind, got[cur][0], got[cur][1], got[cur_b][1]))
        return out

    def judged(out, kind):
        """the attacked fleet's passes of kind that did not send replica 1 its rows, and those
        beside them: both medians (CPU ms), their ratio, and how many pairs were over 1.2 times"""
        pairs = [(a, b) for k, rows, a, b in out if k == kind and rows < ONE // 2]
        a, b = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        return a, b, a / b, sum(1 for x, y in pairs if x > 1.2 * y), len(pairs)

    def said(what, out):
        (ia, ib, ir, io, n), (ca, cb, cr, co, _) = judged(out, "idle"), judged(out, "change")
        print(f"  {what}: idle pass {ia:6.2f} ms beside {ib:6.2f} ms ({ir:.2f}x);"
              f" one-row change {ca:6.2f} ms beside {cb:6.2f} ms ({cr:.2f}x);"
              f" {io + co} of {2 * n} pairs over 1.2x")
        return ir, cr

    base = said("none refused", alternating())
    refuse([], "b0")   # its build, said before it refuses anything: its first says no change
    took = refuse(keys, "b0")
    att.execute("SELECT count(*) FROM sync.refused_rows WHERE replica = %s", (ids[0],))
    print(f"  replica 1 files an upload refusing {att.fetchone()[0]:,} rows in {took:.1f} s of CPU (its own cost)")
    att_b.execute("SELECT sync.file(%s, %s)", (ids[0], refusing([], "b0")))
    nodue = said(f"{ONE:,} refused, none due", alternating())
    filed = []

    def attack(j):
        filed.append(refuse(keys, f"b{j + 1}"))

    def beside(j):
        att_b.execute("SELECT sync.file(%s, %s)", (ids[0], refusing([], "b0")))

    began = time.monotonic()
    out = alternating(attack, beside)
    took = time.monotonic() - began
    print(f"  attack: before each of its fleet's passes, replica 1 files an upload refusing them all again and"
          f" saying a new build (beside, replica 1 files one refusing none); {len(out)} pairs in {took:.0f} s:")
    attacked = said("    other replicas' passes", out)
    retries = [ms for kind, rows, ms, _ in out if rows >= ONE // 2]
    print(f"    passes sending replica 1 its {ONE:,} rows again: {len(retries)}"
          f" ({', '.join(f'{ms:.0f} ms' for ms in retries)}): the first new build at once,"
          f" then a minute after each refusal, doubling (the builds after the first, within ten minutes, make"
          f" none due); its uploads took {statistics.median(filed):.2f} s of CPU each (median, its own session)")
    cur.execute("SELECT count(*) FILTER (WHERE due <= now()), count(*) FILTER (WHERE due > now()),"
                " count(*) FILTER (WHERE due IS NULL) FROM sync.refused_rows")
    print("    after it: refused rows due, waiting, sent and awaited:", cur.fetchone())
    print(f"  JUDGED (target <= 1.2): other replicas' passes under the attack / the fleet beside's at the same"
          f" time: idle {attacked[0]:.2f}x, one-row change {attacked[1]:.2f}x (the two fleets before any refusal:"
          f" {base[0]:.2f}x, {base[1]:.2f}x; refused, none due: {nodue[0]:.2f}x, {nodue[1]:.2f}x)")

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
