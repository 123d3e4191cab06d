#!/usr/bin/python3
"""alarms.py - refused claims recorded by few background workers, whatever
replicas claim and however often (issue 38.6).

A claim the server refuses (sync.pull after a number it never wrote, with
no seal) is recorded on its replica by a background worker, out of the
refused transaction (src/pg/transport/alarm.c).  Before, each refusal of a
claim not recorded in the last 10 seconds started a worker of its own: a
replica varying the number it claims started one per call, and 1,600 bad
pulls held 7 of 8 worker slots while a parallel query got none.

  - one replica's role pulls after 400 different numbers, from 4
    connections at once: at most one alarm worker runs at any time (sampled
    from pg_stat_activity throughout), a parallel query run meanwhile gets
    every worker it plans, every pull is refused (22023), and the replica's
    last claim is what sync.refused_claims records;
  - 8 replicas' roles do the same at once: at most 2 alarm workers run (the
    cap), and each replica's last claim is recorded.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import threading
import time

import psycopg2

from harness import Server, check, finish

DB = "alarms"
REPLICAS = [f"a1a1a1a1-0000-4000-8000-{i:012d}" for i in range(1, 9)]

srv = Server(DB)
srv.exec("""
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 10) g;
CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO big SELECT g, g FROM generate_series(1, 200000) g;
ANALYZE big;
""")
for i, r in enumerate(REPLICAS):
    srv.exec(f"CREATE ROLE alarm_store{i} LOGIN PASSWORD 'pw{i}'")
    srv.exec("SELECT sync.replica_add(%s, role => %s)", (r, f"alarm_store{i}"))
srv.relay()


def connect(i):
    c = psycopg2.connect(dbname=DB, user=f"alarm_store{i}", password=f"pw{i}", host="localhost",
                         port=os.environ["PGPORT"])
    c.autocommit = True
    return c


class Sampler(threading.Thread):
    """the most alarm workers seen running at once, read from pg_stat_activity until stopped"""

    def __init__(self):
        super().__init__()
        self.conn = psycopg2.connect(dbname=DB)
        self.conn.autocommit = True
        self.most = 0
        self.samples = 0
        self.stop = False

    def run(self):
        with self.conn.cursor() as c:
            while not self.stop:
                c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync alarm'")
                self.most = max(self.most, c.fetchone()[0])
                self.samples += 1


def bad_pulls(i, numbers, errors):
    """replica i's role pulls after each number (none of which the server wrote, no seal): the SQLSTATEs"""
    conn = connect(i)
    with conn.cursor() as c:
        for n in numbers:
            try:
                c.execute("SELECT count(*) FROM sync.pull(%s, %s, 1048576)", (REPLICAS[i], n))
                errors.append(None)
            except psycopg2.Error as e:
                errors.append(e.pgcode)
    conn.close()


def parallel_query():
    """a parallel query's workers: (planned, launched)"""
    with srv.conn.cursor() as c:
        c.execute("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
                  " SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 4")
        c.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM big WHERE v % 7 = 3")
        plan = c.fetchone()[0][0]["Plan"]
        c.execute("RESET ALL")

    def find(p):
        if "Workers Planned" in p:
            return p["Workers Planned"], p.get("Workers Launched")
        for sub in p.get("Plans", []):
            got = find(sub)
            if got:
                return got
        return None
    return find(plan)


def drained(timeout=60):
    """no alarm worker runs (the claims waiting are recorded)"""
    end = time.time() + timeout
    while time.time() < end:
        if srv.one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync alarm'") == 0:
            time.sleep(0.5)
            if srv.one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'magic_sync alarm'") == 0:
                return True
        time.sleep(0.1)
    return False


def recorded(replica, number, timeout=60):
    """the claim recorded on replica names the number it last claimed"""
    end = time.time() + timeout
    while time.time() < end:
        claim = srv.one("SELECT claim FROM sync.refused_claims WHERE replica = %s", (replica,))
        if claim is not None and claim.endswith(f" {number}"):
            return claim
        time.sleep(0.1)
    return srv.one("SELECT claim FROM sync.refused_claims WHERE replica = %s", (replica,))


# one replica, 400 numbers, 4 connections at once
sampler = Sampler()
sampler.start()
errors = []
threads = [threading.Thread(target=bad_pulls, args=(0, range(10_000 + k, 10_400, 4), errors)) for k in range(4)]
for t in threads:
    t.start()
time.sleep(0.2)
planned, launched = parallel_query()
for t in threads:
    t.join()
bad_pulls(0, [20_000], errors)
last = recorded(REPLICAS[0], 20_000)
drained()
sampler.stop = True
sampler.join()
check("one replica: every bad pull is refused (22023)", sorted(set(errors)), ["22023"])
check("one replica: 401 pulls", len(errors), 401)
check("one replica: at most one alarm worker at a time", sampler.most <= 1, True)
check("one replica: an alarm worker ran", sampler.most >= 1 or last is not None, True)
check("one replica: the parallel query meanwhile gets every worker it plans", launched, planned)
check("one replica: its last claim is recorded", last, "sync.pull after message 20000")
print(f"one replica: {sampler.most} alarm workers at most over {sampler.samples} samples;"
      f" parallel query {launched} of {planned} workers", flush=True)

# 8 replicas at once, 50 numbers each
sampler = Sampler()
sampler.start()
errors = []
threads = [threading.Thread(target=bad_pulls, args=(i, range(30_000, 30_050), errors)) for i in range(len(REPLICAS))]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i in range(len(REPLICAS)):
    bad_pulls(i, [40_000 + i], errors)
lasts = [recorded(r, 40_000 + i) for i, r in enumerate(REPLICAS)]
drained()
sampler.stop = True
sampler.join()
check("many replicas: every bad pull is refused", sorted(set(errors)), ["22023"])
check("many replicas: at most two alarm workers at a time (the cap)", sampler.most <= 2, True)
check("many replicas: each one's last claim is recorded", lasts,
      [f"sync.pull after message {40_000 + i}" for i in range(len(REPLICAS))])
print(f"many replicas: {sampler.most} alarm workers at most over {sampler.samples} samples", flush=True)

# 3 databases at once, one replica each: one worker per database, 2 at most on the server; the
# database left waiting is recorded by the first worker to end
OTHERS = ["alarms_b", "alarms_c"]
others = [Server(db) for db in OTHERS]
for db, o in zip(OTHERS, others):
    o.exec(f"CREATE ROLE {db}_store LOGIN PASSWORD 'pw'")
    o.exec("SELECT sync.replica_add(%s, role => %s)", (REPLICAS[0], f"{db}_store"))


def bad_pulls_in(db, numbers, errors):
    conn = psycopg2.connect(dbname=db, user=f"{db}_store" if db != DB else "alarm_store0",
                            password="pw" if db != DB else "pw0", host="localhost", port=os.environ["PGPORT"])
    conn.autocommit = True
    with conn.cursor() as c:
        for n in numbers:
            try:
                c.execute("SELECT count(*) FROM sync.pull(%s, %s, 1048576)", (REPLICAS[0], n))
                errors.append(None)
            except psycopg2.Error as e:
                errors.append(e.pgcode)
    conn.close()


sampler = Sampler()
sampler.start()
errors = []
threads = [threading.Thread(target=bad_pulls_in, args=(db, range(50_000, 50_100), errors)) for db in [DB] + OTHERS]
for t in threads:
    t.start()
for t in threads:
    t.join()
for k, db in enumerate([DB] + OTHERS):
    bad_pulls_in(db, [60_000 + k], errors)
lasts = []
for k, o in enumerate([srv] + others):
    end = time.time() + 60
    while time.time() < end:
        claim = o.one("SELECT claim FROM sync.refused_claims WHERE replica = %s", (REPLICAS[0],))
        if claim == f"sync.pull after message {60_000 + k}":
            break
        time.sleep(0.1)
    lasts.append(claim)
drained()
sampler.stop = True
sampler.join()
check("databases: every bad pull is refused", sorted(set(errors)), ["22023"])
check("databases: at most two alarm workers at a time (the cap)", sampler.most <= 2, True)
check("databases: each one's last claim is recorded", lasts,
      [f"sync.pull after message {60_000 + k}" for k in range(3)])
print(f"databases: {sampler.most} alarm workers at most over {sampler.samples} samples", flush=True)
finish()
