#!/usr/bin/python3
"""Memory while filing an upload (issue 38.7).  Not a test: prints figures.

A backend's peak private memory (RssAnon, sampled from /proc every half
millisecond) while sync.file files one upload, above what it held just
before, against the upload's size: the ratio peak / upload (target <= 4),
for an upload of about SIZE bytes (9 MB, the size that took a backend to
232 MB) made of one part kind each:

  rows       upserts of a record table (JSON rows of ~100 bytes)
  backlog    backlog entries, one per table name (127 bytes each)
  refusals   rows refused, of rows the replica does not hold
  digests    digests, one per table name
  tables     one Rows per table, one row each (tables that are not mirrored)

and beside each, the same kind at a tenth of the size (the ratio should not
grow with the upload).  Each upload is stored in a table first, so the
query text is small; it is filed in a backend of its own, as the replica.

Twice: in a new backend (cold: its growth counts what any first filing of a
session costs, about 1.6 MB of catalog and plan caches, whatever the
upload), and in a backend that filed an empty upload just before (warm:
what this upload costs).  The target is read warm, and cold beyond what a
fresh backend's filing of an empty upload takes (the least of three): the
session's caches are any first filing's, not the upload's.

  bench/run filing_memory.py [SIZE]
"""
import json
import os
import sys
import threading
import time
import uuid

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import wire  # noqa: E402  (uploads by hand, docs/protocol.md 7)

SIZE = int(sys.argv[1]) if len(sys.argv) > 1 else 9_200_000
R = "f1f1f1f1-0000-4000-8000-000000000001"
DB = os.environ.get("PGDATABASE", "postgres")


def connect():
    c = psycopg2.connect(dbname=DB)
    c.autocommit = True
    return c


class Sampler(threading.Thread):
    """a backend's RssAnon (kB), sampled until stopped: the most seen"""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.path = f"/proc/{pid}/status"
        self.peak = 0
        self.stop = False

    def now(self):
        with open(self.path) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
        return 0

    def run(self):
        while not self.stop:
            try:
                self.peak = max(self.peak, self.now())
            except OSError:
                return
            time.sleep(0.0005)


def head():
    return wire.field(1, 1) + wire.field(2, uuid.UUID(R).bytes) + wire.field(3, os.urandom(16))


def name(i):
    return f"t{i:07d}_" + "x" * 118          # 127 bytes: the longest a name may be


def upload(kind, size):
    """an upload of about size bytes of one part kind"""
    parts = [head()]
    if kind == "rows":
        n = size // 165
        rows = [wire.field(1, "visits")]
        for i in range(n):
            rows.append(wire.field(2, json.dumps({"store": R, "id": i, "note": "n" * 48}))
                        + wire.field(3, wire.key([R, i])))
        parts.append(wire.field(5, b"".join(rows)))
    elif kind == "backlog":
        for i in range(min(size // 140, 65536)):
            parts.append(wire.field(8, wire.field(1, name(i)) + wire.field(2, 1) + wire.field(3, 2)))
    elif kind == "refusals":
        for i in range(size // 180):
            parts.append(wire.field(6, wire.field(1, "visits") + wire.field(2, wire.key([R, i]))
                                    + wire.field(3, "the app's trigger refused it: " + "r" * 100)))
    elif kind == "digests":
        for i in range(min(size // 145, 65536)):
            parts.append(wire.field(7, wire.field(1, name(i)) + wire.field(2, 1) + wire.fixed64(3, 7)))
    elif kind == "tables":
        for i in range(size // 160):
            parts.append(wire.field(5, wire.rows(name(i), upserts=[((1,), '{"id": 1}')])))
    parts.append(wire.field(11, wire.now_seq()))
    return wire.checked(b"".join(parts))


def measure(admin, kind, size, warm):
    """the upload's size, the backend's peak growth filing it (bytes), what sync.file said;
    warm: the backend filed an empty upload first"""
    conn = connect()
    c = conn.cursor()
    c.execute("SET client_min_messages = error")
    if warm:
        c.execute("SELECT sync.file(%s, %s)", (R, psycopg2.Binary(upload("none", 0))))
    up = upload(kind, size)        # numbered after the empty one
    admin.cursor().execute("TRUNCATE bench_upload")
    admin.cursor().execute("INSERT INTO bench_upload VALUES (%s)", (psycopg2.Binary(up),))
    c.execute("SELECT length(b) FROM bench_upload")      # the table's pages read once, before
    c.execute("SELECT pg_backend_pid()")
    s = Sampler(c.fetchone()[0])
    before = s.now()
    s.start()
    try:
        c.execute("SELECT sync.file(%s, (SELECT b FROM bench_upload))", (R,))
        said = c.fetchone()[0]
        said = {k: said[k] for k in ("filed", "refused", "dropped", "waiting", "set_aside") if said.get(k)}
    except psycopg2.Error as e:
        said = e.pgcode + " " + e.pgerror.splitlines()[0]
    s.stop = True
    s.join()
    conn.close()
    return len(up), (max(s.peak, before) - before) * 1024, said


admin = connect()
cur = admin.cursor()
print("load average %.2f %.2f %.2f" % os.getloadavg(), flush=True)
cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
cur.execute("DROP TABLE IF EXISTS visits, bench_upload CASCADE")
cur.execute("CREATE EXTENSION magic_sync")
cur.execute("CREATE TABLE visits (store uuid, id bigint, note text NOT NULL, PRIMARY KEY (store, id))")
cur.execute("SELECT sync.mirror('visits', 'record', origin => 'store')")
cur.execute("SELECT sync.replica_add(%s)", (R,))
cur.execute("CREATE TABLE bench_upload (b bytea)")
cur.execute("ALTER TABLE bench_upload ALTER COLUMN b SET STORAGE EXTERNAL")
cur.execute("ALTER SYSTEM SET magic_sync.upload_bytes = '16MB'")
cur.execute("SELECT pg_reload_conf()")
print(f"peak private memory filing one upload of each kind (RssAnon above the backend's before)")
# a fresh backend's first filing of an empty upload, the least of three: the session's caches,
# which any first filing costs whatever it carries; cold figures are read beyond it too
cold_base = min(measure(admin, "none", 0, False)[1] for _ in range(3))
print(f"  a fresh backend filing an empty upload: +{cold_base / 1e6:.1f} MB (the cold figures' baseline)")
worst = {}
for kind in ("rows", "backlog", "refusals", "digests", "tables"):
    for size in (SIZE // 10, SIZE):
        line = f"  {kind:9s}"
        for warm in (False, True):
            n, grew, said = measure(admin, kind, size, warm)
            ratio = grew / n
            worst[size, warm] = max(worst.get((size, warm), 0), ratio)
            line += f" {n / 1e6:5.2f} MB upload {'warm' if warm else 'cold'}: +{grew / 1e6:5.1f} MB = {ratio:5.2f} x"
            if not warm:
                beyond = (grew - cold_base) / n
                worst[size, "beyond"] = max(worst.get((size, "beyond"), 0), beyond)
                line += f" ({beyond:5.2f} x beyond the baseline)"
            line += ";"
        print(f"{line}   {said}", flush=True)
for size in (SIZE // 10, SIZE):
    print(f"worst peak / upload at {size / 1e6:.2f} MB: warm {worst[size, True]:.2f} (target <= 4),"
          f" cold {worst[size, False]:.2f}, cold beyond a fresh backend's empty filing {worst[size, 'beyond']:.2f} (target <= 4)")
print("load average %.2f %.2f %.2f" % os.getloadavg())
admin.close()
