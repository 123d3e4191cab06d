#!/usr/bin/python3
"""monitoring.py - docs/monitoring/queries.yaml through the real exporter.
The shop (examples/shop) with three stores: Oslo and Lisbon real SQLite
replicas that sync, Bergen registered and never heard from (its snapshot
waits in the outbox).  Then things go wrong the ways an operator watches
for: a product too large for a message (quarantined), a sale the head
office cannot file (set aside in the inbox), changes the relay has not
planned yet.  Debian's prometheus-postgres-exporter is started on loopback
with queries.yaml, as a role that is only granted sync_admin and
pg_monitor, and its /metrics read over HTTP: every metric must be what the
SQL it stands for says, computed here from the catalog directly.  Every
metric the Grafana dashboard (docs/monitoring/grafana.json) draws must be
one the exporter serves.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

from harness import TOP, Replica, Server, check, finish

OSLO = "a1a1a1a1-0000-4000-8000-000000000001"
LISBON = "b2b2b2b2-0000-4000-8000-000000000002"
BERGEN = "c3c3c3c3-0000-4000-8000-000000000003"
EXPORTER = shutil.which("prometheus-postgres-exporter") or "/usr/bin/prometheus-postgres-exporter"
tmp = tempfile.mkdtemp()

srv = Server("shop")
for f in ("schema.sql", "declare.sql", "seed.sql"):
    subprocess.run(["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", "-d", "shop", "-f",
                    os.path.join(TOP, "examples", "shop", f)], check=True, stdout=subprocess.DEVNULL)
for uuid, region in ((OSLO, "north"), (LISBON, "south"), (BERGEN, "north")):
    srv.exec("SELECT sync.replica_add(%s, %s)", (uuid, region))
oslo = Replica(srv, OSLO, os.path.join(tmp, "oslo.db"))
lisbon = Replica(srv, LISBON, os.path.join(tmp, "lisbon.db"))


def settle():
    for _ in range(6):
        did = srv.relay()
        moved = [r.sync() for r in (oslo, lisbon)]
        if did["messages"] == 0 and did["provisioned"] == 0 and all(len(m) == 1 and not m[0][0] for m in moved):
            return


settle()
# a product no message can carry: quarantined
srv.exec("SET magic_sync.message_bytes = 1024")
srv.exec("UPDATE products SET name = repeat('x', 2000) WHERE id = 3")
settle()
srv.exec("RESET magic_sync.message_bytes")
# a sale the head office's own rule refuses (a CHECK the replica does not
# carry): it cannot file it.  (A sale of a product Oslo does not hold is
# refused by Oslo's file itself now, tests/e2e/reach.py.)
srv.exec("ALTER TABLE sales ADD CONSTRAINT sales_qty_positive CHECK (qty > 0)")
oslo.q("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)"
       " VALUES (?, 1, 1, 0, 100, datetime('now'), 1)", (OSLO,))
oslo.sync()
# a sale Lisbon wrote that can never go up (too large for any upload of
# its): set aside in its file, its backlog says why
lisbon.q("SELECT sync_config('max_upload_bytes', 1024)")
lisbon.q("INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)"
         " VALUES (?, 1, 1, 1, 100, replace(hex(zeroblob(1500)), '00', 'x'), 1)", (LISBON,))
lisbon.sync()
# changes the relay has not planned yet
srv.exec("UPDATE products SET price = price + 1 WHERE id IN (1, 2)")
time.sleep(1.1)

check("a row is quarantined", srv.one("SELECT count(*) FROM sync.quarantine"), 1)
check("an upload is set aside", srv.one("SELECT count(*) FROM sync.inbox WHERE sqlstate IS NOT NULL"), 1)
check("Lisbon's backlog says a write set aside, and why",
      srv.rows("SELECT (b.value ->> 'set_aside')::int, a.value ->> 'sqlstate' FROM sync.replicas r,"
               " jsonb_each(r.backlog) b, jsonb_array_elements(b.value -> 'aside') a WHERE r.id = %s", (LISBON,)),
      [(1, "54000")])
check("Bergen's snapshot waits in the outbox",
      srv.one("SELECT count(*) > 0 FROM sync.outbox o WHERE o.replica = %s AND NOT o.dropped", (BERGEN,)), True)

# --- the exporter, as a role granted sync_admin and pg_monitor only --------
srv.exec("CREATE ROLE prometheus LOGIN PASSWORD 'scrape'")
srv.exec("GRANT sync_admin, pg_monitor TO prometheus")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
# the DSN alone says where: lib/pq refuses some of libpq's variables
# (PGSYSCONFDIR, which pg_virtualenv sets), and the exporter must not borrow
# the test's superuser password
env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
env["DATA_SOURCE_NAME"] = (f"host=127.0.0.1 port={os.environ.get('PGPORT', '5432')}"
                           " user=prometheus password=scrape dbname=shop sslmode=disable")
log = open(os.path.join(tmp, "exporter.log"), "w")
exporter = subprocess.Popen([EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
                             "--extend.query-path=" + os.path.join(TOP, "docs", "monitoring", "queries.yaml"),
                             "--disable-default-metrics", "--disable-settings-metrics"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def scrape():
    """The exporter's metrics: {(name, frozenset of labels): value}."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = frozenset((k, v) for k, v in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")
                               if k != "server")
            out[(m.group(1), labels)] = float(m.group(3))
    return out


try:
    metrics = None
    for _ in range(50):
        try:
            metrics = scrape()
            if any(n.startswith("magic_sync_") for n, _ in metrics):
                break
        except OSError:
            pass
        time.sleep(0.2)
    check("the exporter serves magic_sync's metrics", metrics is not None and
          any(n.startswith("magic_sync_") for n, _ in metrics), True)
    metrics = metrics or {}
    check("no query of queries.yaml failed", metrics.get(("pg_exporter_last_scrape_error", frozenset())), 0.0)
    at = srv.one("SELECT extract(epoch FROM now())")

    def get(name, **labels):
        return metrics.get((name, frozenset(labels.items())))

    # replicas per state, from what sync.listing says of each
    states = dict(srv.rows("SELECT state::text, count(*) FROM sync.listing(\"limit\" => NULL) GROUP BY state"))
    for state in [s for s, in srv.rows("SELECT unnest(enum_range(NULL::sync.state))::text")]:
        check(f"replicas {state}", get("magic_sync_replicas_count", state=state), float(states.get(state, 0)))
    check("the quarantine sets every replica aside", get("magic_sync_replicas_count", state="set_aside"), 2.0)
    check("but Lisbon, whose write never goes up", get("magic_sync_replicas_count", state="writes_refused"), 1.0)

    # the notes pending and the oldest one's age
    pending, oldest = srv.rows("SELECT count(*), extract(epoch FROM now() - min(noted)) FROM sync.notes"
                               " WHERE NOT done AND parked IS NULL")[0]
    check("notes pending", get("magic_sync_notes_pending"), float(pending))
    check("there are notes pending", pending > 0, True)
    age = get("magic_sync_notes_oldest_pending_seconds")
    check("the oldest pending note's age", age is not None and abs(age - float(oldest)) < 5, True)
    check("notes parked", get("magic_sync_notes_parked"),
          float(srv.one("SELECT count(*) FROM sync.notes WHERE NOT done AND parked IS NOT NULL")))

    # per table: quarantined rows and pending notes
    for table, quarantined, notes in srv.rows(
            "SELECT t.relid::text, (SELECT count(*) FROM sync.quarantine q WHERE q.tab = t.id),"
            " (SELECT count(*) FROM sync.notes n WHERE n.tab = t.id AND NOT n.done AND n.parked IS NULL)"
            " FROM sync.tables t"):
        check(f"{table}: quarantined", get("magic_sync_table_quarantined", table=table), float(quarantined))
        check(f"{table}: notes pending", get("magic_sync_table_notes_pending", table=table), float(notes))
    check("products has the quarantined row", get("magic_sync_table_quarantined", table="products"), 1.0)

    # the outbox: messages live replicas have not acknowledged, and bytes
    messages, nbytes, waiting = srv.rows(
        "SELECT count(*), coalesce(sum(o.bytes), 0), count(DISTINCT o.replica) FROM sync.outbox o"
        " JOIN sync.replicas r ON r.id = o.replica"
        " WHERE r.live AND NOT r.dropped AND NOT o.dropped AND o.number > r.acked_number")[0]
    check("outbox messages", get("magic_sync_outbox_messages"), float(messages))
    check("outbox bytes", get("magic_sync_outbox_bytes"), float(nbytes))
    check("replicas with messages waiting", get("magic_sync_outbox_replicas_waiting"), float(waiting))
    check("Bergen's snapshot is counted", messages > 0 and nbytes > 0, True)

    # the inbox and the rows refused
    for kind, cond in (("set_aside", "sqlstate IS NOT NULL"), ("waiting", "sqlstate IS NULL")):
        check(f"inbox {kind}", get("magic_sync_inbox_rows", kind=kind),
              float(srv.one(f"SELECT count(*) FROM sync.inbox WHERE {cond}")))
    check("rows refused", get("magic_sync_rows_refused"),
          float(srv.one("SELECT count(*) FROM sync.held WHERE refused IS NOT NULL")))

    # rows replicas wrote that never go up, as their backlogs say
    writes = srv.rows("SELECT coalesce(sum((b.value ->> 'set_aside')::bigint), 0), count(DISTINCT r.id)"
                      " FILTER (WHERE (b.value ->> 'set_aside')::bigint > 0)"
                      " FROM sync.replicas r CROSS JOIN LATERAL jsonb_each(r.backlog) b"
                      " WHERE r.live AND NOT r.dropped")[0]
    check("writes refused: rows", get("magic_sync_writes_refused_rows"), float(writes[0]))
    check("writes refused: replicas", get("magic_sync_writes_refused_replicas"), float(writes[1]))
    check("Lisbon's one sale", tuple(writes), (1, 1))

    # last heard, bucketed: Oslo and Lisbon just now, Bergen never
    heard = {}
    for ago, in srv.rows("SELECT CASE WHEN heard_at IS NULL THEN 'never'"
                         " WHEN heard_at > now() - interval '1 minute' THEN 'under_1m' ELSE 'older' END"
                         " FROM sync.replicas WHERE live AND NOT dropped"):
        heard[ago] = heard.get(ago, 0) + 1
    check("heard from in the last minute", get("magic_sync_heard_replicas", ago="under_1m"), float(heard.get("under_1m", 0)))
    check("never heard from", get("magic_sync_heard_replicas", ago="never"), float(heard.get("never", 0)))
    check("Oslo and Lisbon just now, Bergen never", (heard.get("under_1m"), heard.get("never")), (2, 1))
    check("every live replica in one bucket",
          sum(v for (n, _), v in metrics.items() if n == "magic_sync_heard_replicas"), 3.0)

    # the dashboard draws only what the exporter serves
    dash = json.load(open(os.path.join(TOP, "docs", "monitoring", "grafana.json")))
    served = {n for n, _ in metrics}
    drawn = {m for p in dash["panels"] for t in p["targets"] for m in re.findall(r"magic_sync_[a-z0-9_]+", t["expr"])}
    check("the dashboard draws metrics", len(drawn) >= 10, True)
    check("every metric the dashboard draws is served", sorted(drawn - served), [])
    check("every metric served is drawn", sorted(n for n in served if n.startswith("magic_sync_") and n not in drawn), [])
finally:
    exporter.terminate()
    exporter.wait(timeout=10)
    log.close()
    if os.environ.get("MS_SHOW_EXPORTER_LOG"):
        print(open(os.path.join(tmp, "exporter.log")).read())
finish()
