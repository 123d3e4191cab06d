#!/usr/bin/python3
"""Schema changes at fleet scale (issue 16).  Not a test: prints figures and
ratios against a baseline measured in the same run.

A fleet of R replicas (default 200), each a real SQLite file through the
replica extension, holds a table of N rows (default 10^5) and five small
tables.  Measured, each from the first relay pass until every replica has
pulled and applied everything (the replicas one after another, as one
machine can), in rows sent, bytes written to the outboxes (what the
replicas pull), and seconds:

  provisioning     the whole fleet provisioned: what any change of schema
                   cost before schema changes travelled (the baseline)
  add column       ALTER TABLE big ADD COLUMN ... DEFAULT: the schema change,
                   no row.  Target: <= 1/5 of the baseline's bytes
  new table        a small table declared with sync.mirror: its schema and
                   its rows.  Target: <= 1/100 of the baseline's bytes
  rows again       ALTER TABLE big ADD COLUMN with a volatile default: the
                   big table's rows again, nothing else (no target)

Run through bench/run (which starts a throw-away cluster):
  bench/run migrate.py [R [N [again]]]
again 0 leaves out "rows again" (at R = 200 it plans R x N rows one note at a
time, which takes far longer than the snapshot of the same rows).
"""
import os
import sqlite3
import sys
import tempfile
import time
import uuid

import psycopg2

R = int(sys.argv[1]) if len(sys.argv) > 1 else 200
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
AGAIN = int(sys.argv[3]) if len(sys.argv) > 3 else 1
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXTENSION = os.path.join(TOP, "magic_sync_sqlite")
tmp = tempfile.mkdtemp()


def connect(db):
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


admin = connect(os.environ.get("PGDATABASE", "postgres"))
admin.cursor().execute("DROP DATABASE IF EXISTS migrate")
admin.cursor().execute("CREATE DATABASE migrate")
pg = connect("migrate")
cur = pg.cursor()
cur.execute("SET client_min_messages = warning")
cur.execute("CREATE EXTENSION magic_sync")
cur.execute(f"""
CREATE TABLE big (id int PRIMARY KEY, name text NOT NULL, price int NOT NULL, qty int NOT NULL, note text);
INSERT INTO big SELECT g, 'item ' || g, g % 1000, g % 17, 'note ' || (g % 97) FROM generate_series(1, {N}) g;
SELECT sync.mirror('big', 'catalog', 'broadcast');
""")
for i in range(1, 6):
    cur.execute(f"CREATE TABLE small{i} (id int PRIMARY KEY, v text NOT NULL)")
    cur.execute(f"INSERT INTO small{i} SELECT g, 'v' || g FROM generate_series(1, 1000) g")
    cur.execute(f"SELECT sync.mirror('small{i}', 'catalog', 'broadcast')")
ids = [str(uuid.UUID(int=0xbbbbbbbb_0000_4000_8000_000000000000 + i)) for i in range(R)]
for r in ids:
    cur.execute("SELECT sync.replica_add(%s)", (r,))


class Replica:
    def __init__(self, rid):
        self.id = rid
        self.path = os.path.join(tmp, f"{rid}.db")
        self.applied = 0

    def open(self):
        db = sqlite3.connect(self.path, isolation_level=None)
        db.enable_load_extension(True)
        db.load_extension(EXTENSION)
        db.enable_load_extension(False)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def pull_apply(self, db):
        """Everything waiting, pulled and applied; the bytes pulled."""
        pulled = 0
        while True:
            cur.execute("SELECT number, message FROM sync.pull(%s, %s, %s)", (self.id, self.applied, 16 << 20))
            rows = [(n, bytes(m)) for n, m in cur.fetchall() if n is not None]
            if not rows:
                return pulled
            for n, m in rows:
                db.execute("SELECT sync_apply(?)", (m,)).fetchone()
                self.applied = n
                pulled += len(m)

    def acknowledge(self, db):
        up = db.execute("SELECT sync_upload()").fetchone()[0]
        if up is not None:
            cur.execute("SELECT sync.file(%s, %s, NULL)", (self.id, psycopg2.Binary(up)))


replicas = [Replica(r) for r in ids]


def relay():
    """Passes until nothing is left to plan; the rows they sent and the messages they wrote."""
    rows = messages = 0
    while True:
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT rows_sent, messages, provisioned FROM sync.relay_pass()")
        sent, msgs, prov = cur.fetchone()
        cur.execute("COMMIT")
        rows += sent
        messages += msgs
        cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
        if cur.fetchone()[0] == 0 and msgs == 0 and prov == 0:
            return rows, messages


def measure(name, change):
    """A change, relayed and applied by the whole fleet: rows, bytes, seconds."""
    cur.execute("SELECT last_value FROM sync.message_seq")
    before = cur.fetchone()[0]
    t0 = time.monotonic()
    change()
    rows, messages = relay()
    relayed = time.monotonic() - t0
    cur.execute("SELECT coalesce(sum(bytes), 0) FROM sync.outbox WHERE number > %s", (before,))
    written = cur.fetchone()[0]
    pulled = 0
    for r in replicas:
        db = r.open()
        pulled += r.pull_apply(db)
        db.close()
    took = time.monotonic() - t0
    # acknowledged, outside the figure: the next change starts from a caught-up fleet
    for r in replicas:
        db = r.open()
        r.acknowledge(db)
        r.pull_apply(db)
        db.close()
    print(f"{name:12s} {rows:>10d} rows {messages:>6d} messages {written:>13,d} bytes written,"
          f" {pulled:>13,d} pulled; relayed in {relayed:7.2f} s, applied by all in {took:7.2f} s", flush=True)
    return {"rows": rows, "bytes": pulled, "seconds": took}


def sql(text):
    return lambda: cur.execute(text)


print(f"{R} replicas, a table of {N} rows and five of 1000", flush=True)
base = measure("provisioning", lambda: None)
add = measure("add column", sql("ALTER TABLE big ADD COLUMN tax int NOT NULL DEFAULT 7"))
new = measure("new table", sql("CREATE TABLE notices (id int PRIMARY KEY, body text NOT NULL);"
                               " INSERT INTO notices SELECT g, 'notice ' || g FROM generate_series(1, 20) g;"
                               " SELECT sync.mirror('notices', 'catalog', 'broadcast')"))
again = measure("rows again", sql("ALTER TABLE big ADD COLUMN code int DEFAULT (random() * 0)::int")) if AGAIN else None

# what the fleet holds: the new column's value on every row, the new table whole
sample = replicas[:: max(1, R // 10)]
for r in sample:
    db = r.open()
    assert db.execute("SELECT count(*) FROM big WHERE tax = 7" + (" AND code = 0" if AGAIN else "")).fetchone()[0] == N, r.id
    assert db.execute("SELECT count(*) FROM notices").fetchone()[0] == 20, r.id
    db.close()
cur.execute("SELECT count(*) FROM sync.replicas WHERE provision")
assert cur.fetchone()[0] == 0
print(f"checked {len(sample)} replicas: every row has the new columns' values, the new table is whole")

print()
print(f"add column / provisioning:  rows {add['rows'] / max(base['rows'], 1):.6f}, bytes {add['bytes'] / base['bytes']:.6f}"
      f" (target <= 0.2), time {add['seconds'] / base['seconds']:.4f}")
print(f"new table / provisioning:   rows {new['rows'] / max(base['rows'], 1):.6f}, bytes {new['bytes'] / base['bytes']:.6f}"
      f" (target <= 0.01), time {new['seconds'] / base['seconds']:.4f}")
if again:
    print(f"rows again / provisioning:  rows {again['rows'] / max(base['rows'], 1):.4f}, bytes {again['bytes'] / base['bytes']:.4f}"
          f", time {again['seconds'] / base['seconds']:.4f}")
pg.close()
admin.cursor().execute("DROP DATABASE migrate")
