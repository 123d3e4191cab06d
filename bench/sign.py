#!/usr/bin/python3
"""What signing costs the relay (issue 38.4): the same pass with the installation's
key and without it.  Not a test: prints figures and the ratio, signed / unsigned.

  snapshot  one replica provisioned with N five-column rows (default 10^6): a few
            hundred messages of up to magic_sync.message_bytes, a signature each
  fan-out   one broadcast row changed, sent to R replicas (default 2,000): R
            messages sharing one body, R signatures of 32 bytes

Unsigned: sync.signing_key renamed away for the pass, as in a catalog not updated to
0.2 (ms_signing_key finds none, record.c signs nothing): the same build, the same
statements.  Each pass runs in a backend of its own, warmed by a one-row pass; what
is compared is that backend's CPU time over the pass (utime + stime, from
/proc/<pid>/stat), so that other work on the machine weighs less than wall-clock
time would; runs alternate signed and unsigned, and the medians are compared.

Run through bench/run (which starts a throw-away cluster):
  bench/run sign.py [N [R [ROUNDS]]]
"""
import os
import statistics
import sys
import time
import uuid

import psycopg2

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
R = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
TICK = os.sysconf("SC_CLK_TCK")


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


def cpu(pid):
    """a backend's CPU seconds so far"""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def signing(cur, on):
    cur.execute("SELECT to_regclass('sync.signing_key') IS NOT NULL")
    if cur.fetchone()[0] != on:
        cur.execute("ALTER TABLE sync.%s RENAME TO %s" % (("signing_key_off", "signing_key") if on
                                                          else ("signing_key", "signing_key_off")))


def timed_pass(setup, check):
    """one pass in a backend of its own, warmed: (CPU s, wall s), and what check says of it"""
    conn = connect()
    cur = conn.cursor()
    cur.execute("SET temp_buffers = '1MB'")
    cur.execute("UPDATE warm SET id = id")
    cur.execute("SELECT * FROM sync.relay_pass()")
    arg = setup(cur)
    cur.execute("CHECKPOINT")
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    c0, t0 = cpu(pid), time.monotonic()
    cur.execute("SELECT messages FROM sync.relay_pass()")
    messages = cur.fetchone()[0]
    c1, t1 = cpu(pid), time.monotonic()
    out = check(cur, arg)
    conn.close()
    return c1 - c0, t1 - t0, messages, out


def compare(name, setup, check):
    conn = connect()
    cur = conn.cursor()
    runs = {True: [], False: []}
    for r in range(ROUNDS):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            signing(cur, on)
            c, t, messages, signed = timed_pass(setup, check)
            runs[on].append((c, t, messages, signed))
    signing(cur, True)
    conn.close()
    for on in (True, False):
        cs = [c for c, _, _, _ in runs[on]]
        print(f"  {name} {'signed  ' if on else 'unsigned'}: CPU {statistics.median(cs):7.2f} s (median of {len(cs)};"
              f" {', '.join(f'{c:.2f}' for c in cs)}), wall {statistics.median(t for _, t, _, _ in runs[on]):7.2f} s,"
              f" {runs[on][0][2]} messages, signed: {runs[on][0][3]}", flush=True)
    ratio = statistics.median(c for c, _, _, _ in runs[True]) / statistics.median(c for c, _, _, _ in runs[False])
    print(f"  {name}: signed / unsigned CPU = {ratio:.3f}", flush=True)
    return ratio


def signed_of(cur, replica):
    cur.execute("SELECT count(*) FILTER (WHERE position('\\x7240'::bytea IN head) > 0), count(*)"
                " FROM sync.outbox WHERE replica = %s", (replica,))
    s, n = cur.fetchone()
    return f"{s}/{n}"


def main():
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("DROP TABLE IF EXISTS bench, warm, fan CASCADE")
    cur.execute("CREATE TABLE warm (id bigint PRIMARY KEY)")
    cur.execute("INSERT INTO warm VALUES (1)")
    cur.execute("CREATE TABLE bench (id bigint PRIMARY KEY, a int NOT NULL, b text NOT NULL,"
                " c double precision, d timestamptz NOT NULL)")
    cur.execute("INSERT INTO bench SELECT g, g %% 1000, md5(g::text), g / 7.0, now() FROM generate_series(1, %s) g", (N,))
    cur.execute("SELECT sync.mirror('warm', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.mirror('bench', 'catalog', 'broadcast')")
    cur.execute("SELECT * FROM sync.relay_pass()")           # the key, the first epoch
    cur.execute("VACUUM ANALYZE bench")
    conn.close()
    print(f"load average {open('/proc/loadavg').read().split()[0]} at the start", flush=True)

    def add_replica(cur):
        replica = str(uuid.uuid4())
        cur.execute("SELECT sync.replica_add(%s)", (replica,))
        return replica

    print(f"snapshot of {N:,} rows to one replica", flush=True)
    snap = compare("snapshot", add_replica, signed_of)

    # fan-out: a table of its own, R replicas holding it, acknowledged; the snapshot's replicas dropped first
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT sync.unmirror('bench')")
    cur.execute("SELECT sync.replica_drop(id) FROM sync.replicas")
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("CREATE TABLE fan (id bigint PRIMARY KEY, price int NOT NULL)")
    cur.execute("INSERT INTO fan SELECT g, g FROM generate_series(1, 100) g")
    cur.execute("SELECT sync.mirror('fan', 'catalog', 'broadcast')")
    for _ in range(R):
        cur.execute("SELECT sync.replica_add(%s)", (str(uuid.uuid4()),))
    cur.execute("SELECT * FROM sync.relay_pass()")
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas")
    conn.close()

    def change(cur):
        cur.execute("UPDATE sync.replicas SET acked_number = last_number")
        cur.execute("UPDATE fan SET price = price + 1 WHERE id = 1")
        cur.execute("SELECT max(number) FROM sync.outbox")
        return cur.fetchone()[0]

    def fan_signed(cur, before):
        cur.execute("SELECT count(*) FILTER (WHERE position('\\x7240'::bytea IN head) > 0), count(*)"
                    " FROM sync.outbox WHERE number > %s", (before,))
        s, n = cur.fetchone()
        return f"{s}/{n}"

    print(f"fan-out: one broadcast change to {R:,} replicas", flush=True)
    fan = compare("fan-out", change, fan_signed)
    print(f"load average {open('/proc/loadavg').read().split()[0]} at the end", flush=True)
    print(f"signed / unsigned CPU: snapshot {snap:.3f}, fan-out {fan:.3f}")


if __name__ == "__main__":
    main()
