#!/usr/bin/python3
"""filing_memory.py - what filing an upload takes of a backend's memory
stays within a small multiple of the upload, whatever it is made of (issue
38.7: a 9.2 MB upload of backlog entries took a backend to 232 MB).

For uploads of about 9 MB of one part kind each -- rows of a record table,
backlog entries, refusals, digests, one Rows per table of tables the server
does not mirror -- the backend's peak private memory (RssAnon, sampled from
/proc while it files) grows by at most 4 times the upload; at a tenth of
that size too, in a backend that filed an upload before (a session's first
filing fills its caches, about 1.6 MB whatever the upload); and in a fresh
backend, beyond what its first filing of an empty upload takes (those
caches are the session's: any upload, even an empty one, costs them once).
Measured, not timed: a sample missed can only under-count, so a failure is
real.

And what the bounds keep: the backlog kept is that of the mirrored tables
(the last entry of each), and of at most 8 tables not mirrored whose rows
the filing refused; an answer counts every mirrored table and at most 1000
it does not mirror.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import sys
import threading
import time
import uuid

import psycopg2

from harness import Server, check, finish

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

R = "f1f1f1f1-0000-4000-8000-000000000002"
SIZE = 9_200_000

srv = Server("filing_memory")
srv.exec("""
CREATE TABLE visits (store uuid, id bigint, note text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('visits', 'record', origin => 'store');
CREATE TABLE bench_upload (b bytea);
ALTER TABLE bench_upload ALTER COLUMN b SET STORAGE EXTERNAL;
""")
srv.exec("SELECT sync.replica_add(%s)", (R,))


def rss_anon(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def name(i):
    return f"t{i:07d}_" + "x" * 118          # 127 bytes, the longest a name may be


def upload(kind, size):
    parts = [wire.field(1, 1), wire.field(2, uuid.UUID(R).bytes), wire.field(3, os.urandom(16))]
    if kind == "rows":
        rows = [wire.field(1, "visits")]
        for i in range(size // 165):
            rows.append(wire.field(2, json.dumps({"store": R, "id": i, "note": "n" * 48}))
                        + wire.field(3, wire.key([R, i])))
        parts.append(wire.field(5, b"".join(rows)))
    elif kind == "backlog":
        parts.append(wire.field(8, wire.field(1, "visits") + wire.field(2, 7)))
        for i in range(min(size // 140, 65534)):
            parts.append(wire.field(8, wire.field(1, name(i)) + wire.field(2, 1) + wire.field(3, 2)))
        parts.append(wire.field(8, wire.field(1, "visits") + wire.field(2, 3)))
    elif kind == "refusals":
        for i in range(size // 180):
            parts.append(wire.field(6, wire.field(1, "visits") + wire.field(2, wire.key([R, i]))
                                    + wire.field(3, "the app's trigger refused it: " + "r" * 100)))
    elif kind == "digests":
        for i in range(min(size // 145, 65536)):
            parts.append(wire.field(7, wire.field(1, name(i)) + wire.field(2, 1) + wire.fixed64(3, 7)))
    elif kind == "tables":
        parts.append(wire.field(5, wire.field(1, "visits") + wire.field(2, json.dumps({"store": R, "id": 10 ** 9, "note": "n"}))
                                + wire.field(3, wire.key([R, 10 ** 9]))))
        for i in range(size // 160):
            parts.append(wire.field(5, wire.field(1, name(i)) + wire.field(2, '{"id": 1}') + wire.field(3, wire.key([1]))))
    parts.append(wire.field(11, wire.now_seq()))
    return wire.checked(b"".join(parts))


def peak_filing(kind, size, warm=False):
    """the upload, and the backend's peak private memory above what it held before, filing it (stored
    in a table first); warm: in a backend that filed an empty upload first (a session's first filing
    fills its catalog and plan caches, about 1.6 MB whatever the upload)"""
    conn = psycopg2.connect(dbname="filing_memory")
    conn.autocommit = True
    c = conn.cursor()
    c.execute("SET client_min_messages = error; SET magic_sync.upload_bytes = '16MB'")
    if warm:
        c.execute("SELECT sync.file(%s, %s)", (R, psycopg2.Binary(upload("none", 0))))
    up = upload(kind, size)
    srv.exec("TRUNCATE bench_upload")
    srv.exec("INSERT INTO bench_upload VALUES (%s)", (psycopg2.Binary(up),))
    c.execute("SELECT length(b) FROM bench_upload")
    c.execute("SELECT pg_backend_pid()")
    pid = c.fetchone()[0]
    before = rss_anon(pid)
    peak = [before]
    done = []

    def sample():
        while not done:
            try:
                peak[0] = max(peak[0], rss_anon(pid))
            except OSError:
                return
            time.sleep(0.0005)
    t = threading.Thread(target=sample)
    t.start()
    try:
        c.execute("SELECT sync.file(%s, (SELECT b FROM bench_upload))", (R,))
        said = c.fetchone()[0]
    finally:
        done.append(True)
        t.join()
    conn.close()
    return up, peak[0] - before, said


# What any session's first filing takes, whatever the upload (its catalog and plan caches, about
# 1.6 MB): an empty upload filed by a fresh backend, the greatest of three -- a missed sample can
# only under-count a peak, and a baseline under-counted would be judged against the upload (seen:
# 1.1 MB once, where 1.6 MB is usual).  A fresh backend's filing is judged by what it takes beyond
# that: the caches are the session's, not the upload's.
cold_base = max(peak_filing("none", 0)[1] for _ in range(3))
print(f"a fresh backend's first filing of an empty upload: peak +{cold_base / 1e6:.1f} MB", flush=True)
for kind in ("rows", "backlog", "refusals", "digests", "tables"):
    # a tenth of the size: what an upload costs past a session's first filing (issue 38.7: one
    # Rows per table it does not mirror took 8-10 times the upload, a backlog entry per table).
    # The smaller of two filings, each in a backend of its own: now and then a peak is 10 MB over
    # the others' (seen after a 9 MB filing), where the cost before the fix was there every time
    (up, grew, said), (up2, grew2, _) = peak_filing(kind, SIZE // 10, warm=True), peak_filing(kind, SIZE // 10, warm=True)
    print(f"{kind}: a {len(up) / 1e6:.2f} MB upload after another, peak +{grew / 1e6:.1f} MB"
          f" ({grew / len(up):.2f} x), then +{grew2 / 1e6:.1f} MB ({grew2 / len(up2):.2f} x)", flush=True)
    up, grew = min((up, grew), (up2, grew2), key=lambda x: x[1] / len(x[0]))
    check(f"{kind}: filing a tenth of the size grows the backend by at most 4 times the upload",
          grew <= 4 * len(up), True)
    # and in a fresh backend, beyond what its first filing of nothing takes (the lesser of two)
    (up, grew, _), (up2, grew2, _) = peak_filing(kind, SIZE // 10), peak_filing(kind, SIZE // 10)
    up, grew = min((up, grew), (up2, grew2), key=lambda x: x[1] / len(x[0]))
    print(f"{kind}: a {len(up) / 1e6:.2f} MB upload in a fresh backend, peak +{grew / 1e6:.1f} MB,"
          f" +{(grew - cold_base) / 1e6:.1f} MB beyond its first filing's ({(grew - cold_base) / len(up):.2f} x)", flush=True)
    check(f"{kind}: a fresh backend filing a tenth of the size grows by at most 4 times the upload beyond"
          " what its first filing of nothing takes", grew - cold_base <= 4 * len(up), True)
    up, grew, said = peak_filing(kind, SIZE)
    print(f"{kind}: a {len(up) / 1e6:.1f} MB upload, peak +{grew / 1e6:.1f} MB ({grew / len(up):.2f} x)", flush=True)
    check(f"{kind}: filing grows the backend by at most 4 times the upload", grew <= 4 * len(up), True)
    if kind == "backlog":
        check("backlog: the mirrored table's last entry kept, no other",
              srv.one("SELECT backlog FROM sync.replicas WHERE id = %s", (R,)),
              {"visits": {"unsent": 3, "unfiled": 0, "set_aside": 0, "refused": 0}})
    if kind == "tables":
        check("tables: every row refused but the mirrored table's", (said["filed"], said["refused"]),
              (1, SIZE // 160))
        answer = srv.rows("SELECT sync.inspect(message) FROM sync.answers WHERE replica = %s"
                          " ORDER BY filed DESC LIMIT 1", (R,))[0][0]
        tables = answer["filed"]["tables"]
        check("tables: the answer counts the mirrored table and 1000 others",
              (len(tables), [t["filed"] for t in tables if t["table"] == "visits"]), (1001, [1]))
        check("tables: the backlog kept names 8 tables not mirrored whose rows were refused (not 1000)",
              srv.one("SELECT count(*) FROM sync.replicas r, jsonb_object_keys(r.backlog) WHERE r.id = %s", (R,)), 8)
finish()
