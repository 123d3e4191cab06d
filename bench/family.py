#!/usr/bin/python3
"""What a one-row change costs against the size of its family (issue 37).
Not a test: prints figures and the ratio it is judged by.

zbugs' shape, integer keys: projects broadcast, issues follow their project,
comments follow their issue.  Two issues of project 1 have N comments each
(the families); the other issues of the database (--issues, 2,000) one
comment each, half of them in project 1; R replicas provisioned.  Then one-row changes, each followed by one
sync.relay_pass() in a warm session:

  child       a comment's body (in place)
  parent      the issue's title (a column no rule reads)
  moves       a comment moving from one family's issue to the other's

A pass is measured as the CPU time of the backend calling sync.relay_pass()
(its /proc/<pid>/schedstat: the cluster runs on this machine) and as its
wall-clock time, the load average beside them.  The median of each kind for N = 1, 2,000 and 20,000, and the ratio 20,000 / 1
(target <= 2 for each kind).

  bench/run family.py [N ...] [--replicas R] [--changes C] [--issues I]
"""
import os
import statistics
import sys
import time
import uuid

import psycopg2

args = sys.argv[1:]
REPLICAS = 20
CHANGES = 9
if "--replicas" in args:
    i = args.index("--replicas")
    REPLICAS = int(args[i + 1])
    del args[i:i + 2]
if "--changes" in args:
    i = args.index("--changes")
    CHANGES = int(args[i + 1])
    del args[i:i + 2]
OTHER_ISSUES = 2_000
if "--issues" in args:
    i = args.index("--issues")
    OTHER_ISSUES = int(args[i + 1])
    del args[i:i + 2]
SIZES = [int(a) for a in args] or [1, 2_000, 20_000]


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    # sync.relay_pass() runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
    c.cursor().execute("SET default_transaction_isolation = 'repeatable read'")
    c.cursor().execute("SET client_min_messages = warning")
    return c


def cpu(pid):
    """The time a process has run on a CPU, in seconds (/proc/<pid>/schedstat: nanoseconds)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def relay_all(cur):
    while True:
        cur.execute("SELECT * FROM sync.relay_pass()")
        cur.execute("SELECT EXISTS (SELECT FROM sync.notes WHERE NOT done)")
        if not cur.fetchone()[0]:
            return


def setup(n):
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP EXTENSION IF EXISTS magic_sync CASCADE")
    cur.execute("DROP TABLE IF EXISTS comments, issues, projects CASCADE")
    cur.execute("CREATE EXTENSION magic_sync")
    cur.execute("CREATE TABLE projects (id int PRIMARY KEY, name text NOT NULL)")
    cur.execute("CREATE TABLE issues (id int PRIMARY KEY, project int NOT NULL REFERENCES projects,"
                " title text NOT NULL)")
    cur.execute("CREATE TABLE comments (id int PRIMARY KEY, issue int NOT NULL REFERENCES issues,"
                " body text NOT NULL)")
    cur.execute("CREATE INDEX ON issues (project)")
    cur.execute("CREATE INDEX ON comments (issue)")
    cur.execute("INSERT INTO projects VALUES (1, 'p1'), (2, 'p2')")
    # issues 1 and 2: the families; 3..: one comment each
    cur.execute("INSERT INTO issues SELECT g, 1 + g %% 2, 'i' || g FROM generate_series(1, %s) g",
                (OTHER_ISSUES + 2,))
    cur.execute("UPDATE issues SET project = 1 WHERE id IN (1, 2)")
    cur.execute("INSERT INTO comments SELECT g, 1 + (g - 1) / %s, 'c' || g FROM generate_series(1, 2 * %s) g",
                (n, n))
    cur.execute("INSERT INTO comments SELECT 2 * %s + g, 2 + g, 'c' FROM generate_series(1, %s) g",
                (n, OTHER_ISSUES))
    cur.execute("VACUUM ANALYZE projects, issues, comments")
    cur.execute("SELECT sync.mirror('projects', 'catalog', 'broadcast')")
    cur.execute("SELECT sync.mirror('issues', 'catalog', 'follows(project)')")
    cur.execute("SELECT sync.mirror('comments', 'catalog', 'follows(issue)')")
    relay_all(cur)
    for i in range(REPLICAS):
        cur.execute("SELECT sync.replica_add(%s)", (str(uuid.UUID(int=i + 1)),))
    relay_all(cur)
    cur.execute("UPDATE sync.replicas SET acked_number = last_number")
    cur.execute("SELECT count(*) FROM sync.held")
    held = cur.fetchone()[0]
    cur.execute("VACUUM ANALYZE sync.held, sync.outbox, sync.replicas, sync.notes")
    cur.execute("CHECKPOINT")
    conn.close()
    return held


def changes(n):
    conn = connect()
    cur = conn.cursor()
    cur.execute("SELECT pg_backend_pid()")
    pid = cur.fetchone()[0]
    cur.execute("SELECT * FROM sync.relay_pass()")      # warm: the plan's temp tables
    kinds = {"child": [], "parent": [], "moves": []}

    def timed(kind):
        c0, t0 = cpu(pid), time.monotonic()
        cur.execute("SELECT * FROM sync.relay_pass()")
        kinds[kind].append((cpu(pid) - c0, time.monotonic() - t0))

    for i in range(CHANGES):
        cur.execute("UPDATE comments SET body = body || 'x' WHERE id = %s", (1 + i % n,))
        timed("child")
        cur.execute("UPDATE issues SET title = title || 'x' WHERE id = 1")
        timed("parent")
        # back and forth: the comment leaves a family of n for one of n
        cur.execute("UPDATE comments SET issue = 3 - issue WHERE id = %s", (n,))
        timed("moves")
    cur.execute("SELECT count(*) FROM sync.notes WHERE NOT done")
    assert cur.fetchone()[0] == 0
    conn.close()
    return kinds


def main():
    print(f"one-row changes in a family of N, one sync.relay_pass() each, {REPLICAS} replicas,"
          f" {OTHER_ISSUES:,} other issues,"
          f" {CHANGES} changes of each kind; median CPU (wall) a pass; load {os.getloadavg()[0]:.2f}")
    medians = {}
    for n in SIZES:
        held = setup(n)
        kinds = changes(n)
        medians[n] = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
                      for k, v in kinds.items()}
        line = "  ".join(f"{k} {c * 1000:7.1f} ms ({w * 1000:7.1f})" for k, (c, w) in medians[n].items())
        print(f"  N={n:>7,}  ({held:,} held)  {line}  load {os.getloadavg()[0]:.2f}")
    if len(SIZES) >= 2:
        big, small = max(SIZES), min(SIZES)
        print(f"N={big:,} / N={small:,} (CPU): " + "  ".join(
            f"{k} {medians[big][k][0] / medians[small][k][0]:.2f}"
            for k in medians[big]) + "  (target <= 2)")


if __name__ == "__main__":
    main()
