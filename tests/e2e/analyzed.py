#!/usr/bin/python3
"""analyzed.py - a pass analyses its plan tables only when their size moved (src/pg/relay/analyze.c).

Under a stream of commits, passes of a few thousand notes each: a pass of
about the size of the one before runs the plans kept from it, and ANALYZE of
its tables (which would make PostgreSQL plan every kept statement again) is
left out; a pass past twice or half that size analyses them again.  An ANALYZE
rolled back, with its transaction or with a savepoint, took its statistics
with it: the next pass of that size analyses again, as it does when the
session's temporary tables were dropped and made again.  Each pass still sends
every row it should, to both replicas.

    tests/e2e/run analyzed.py
"""
import uuid

from harness import Server, check, finish

ROWS = 40000

srv = Server("analyzed")
srv.exec(f"""
CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO items SELECT g, 0 FROM generate_series(1, {ROWS}) g;
SELECT sync.mirror('items', 'catalog', 'broadcast');
""")
replicas = [str(uuid.UUID(int=i + 1)) for i in range(2)]
for r in replicas:
    srv.exec("SELECT sync.replica_add(%s)", (r,))
for _ in range(10):
    if srv.relay()["notes_read"] == 0 and srv.one("SELECT count(*) FROM sync.replicas WHERE provision") == 0:
        break
check("provisioned", srv.one("SELECT count(*) FROM sync.held"), 2 * ROWS)


def analysed():
    """ANALYZEs of the batch's tables, which every pass fills (batch.c), in this session"""
    # a transaction's first read of the statistics is kept until it ends: read them afresh
    srv.exec("SELECT pg_stat_clear_snapshot()")
    return srv.one("SELECT coalesce(sum(pg_stat_get_analyze_count(c.oid)), 0) FROM pg_class c"
                   " WHERE c.relnamespace = pg_my_temp_schema() AND c.relname IN ('ms_notes_read', 'ms_pending')")


def write(n):
    srv.exec("UPDATE items SET v = v + 1 WHERE id <= %s", (n,))


def step(name, n, analyses):
    """n rows written, one pass: it sends them to both replicas, and analyses or not"""
    write(n)
    before = analysed()
    done = srv.relay()
    check(f"{name}: notes read", done["notes_read"], n)
    check(f"{name}: rows sent", done["rows_sent"], 2 * n)
    check(f"{name}: analysed", analysed() > before, analyses)


step("a pass of 1,500 after the snapshot's 40,000", 1500, True)
step("another of 1,500", 1500, False)
step("1,200: within half of 1,500", 1200, False)
step("2,900: within twice", 2900, False)
step("4,000: past twice", 4000, True)
step("2,500: not past half of 4,000", 2500, False)
step("999: too few to analyse at all", 999, False)
step("1,900: past half of 4,000", 1900, True)

# a pass rolled back: its ANALYZE went with it, and the next pass analyses again
write(10000)
srv.exec("BEGIN ISOLATION LEVEL REPEATABLE READ")
before = analysed()
srv.exec("SELECT * FROM sync.relay_pass()")
srv.exec("ROLLBACK")
check("a pass of 10,000 rolled back analysed", analysed() > before, True)
before = analysed()
done = srv.relay()
check("the same notes again: read", done["notes_read"], 10000)
check("the same notes again: analysed, the ANALYZE before rolled back", analysed() > before, True)
step("10,000 again: kept", 10000, False)

# and rolled back to a savepoint
write(30000)
srv.exec("BEGIN ISOLATION LEVEL REPEATABLE READ")
srv.exec("SAVEPOINT s")
before = analysed()
srv.exec("SELECT * FROM sync.relay_pass()")
check("a pass of 30,000 in a savepoint analysed", analysed() > before, True)
srv.exec("ROLLBACK TO SAVEPOINT s")
before = analysed()
done = srv.rows("SELECT notes_read, rows_sent FROM sync.relay_pass()")[0]
srv.exec("COMMIT")
check("after the savepoint: sent", done, (30000, 60000))
check("after the savepoint: analysed again", analysed() > before, True)
# released, a savepoint hands its ANALYZE to the transaction around it: kept after it
write(7000)
srv.exec("BEGIN ISOLATION LEVEL REPEATABLE READ")
srv.exec("SAVEPOINT s")
before = analysed()
srv.exec("SELECT * FROM sync.relay_pass()")
srv.exec("RELEASE SAVEPOINT s")
# another savepoint rolled back after it takes nothing of it
srv.exec("SAVEPOINT t")
srv.exec("SELECT 1")
srv.exec("ROLLBACK TO SAVEPOINT t")
srv.exec("COMMIT")
check("a pass of 7,000 in a savepoint released analysed", analysed() > before, True)
step("7,000 after it: kept", 7000, False)

# the session's temporary tables dropped (DISCARD TEMP, as a pooler may): the new ones are analysed
srv.exec("DISCARD TEMP")
step("7,000 after DISCARD TEMP", 7000, True)
step("7,000 once more: kept", 7000, False)

srv.exec("CREATE TEMP TABLE last_before AS SELECT id, last_number FROM sync.replicas")
step("7,000 again: kept", 7000, False)

# every row held by both replicas, the last pass's in the messages it wrote
check("held", srv.one("SELECT count(*) FROM sync.held"), 2 * ROWS)
check("the last pass's rows held as its messages carried them", srv.one(
    "SELECT count(*) FROM sync.held h JOIN last_before b ON b.id = h.replica"
    " JOIN sync.replicas r ON r.id = h.replica WHERE h.number > b.last_number AND h.number <= r.last_number"),
    2 * 7000)
check("no notes left", srv.one("SELECT count(*) FROM sync.notes WHERE NOT done"), 0)
finish()
