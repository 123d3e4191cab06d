#!/usr/bin/python3
"""oracle.py - the plan agrees with the oracle (docs/design.md 9,
the oracle).  A seeded random walk of writes over a schema that
uses every mirror and sync kind (walk.py), and (DDL=1, the default) now and
then a column added to a mirrored table; after every step a relay pass,
every replica applies and acknowledges, and then:

  - what the engine records each replica holds, acknowledged, equals
    sync.wanted(replica), computed from scratch;
  - the replica's SQLite file holds exactly those rows;
  - no replica holds a row without the rows it points at;
  - the columns the walk added hold the server's values on every replica,
    and no replica was provisioned again for them.

The relay plans around what changed (question.c); sync.wanted computes the
whole set from scratch (wanted.c).  No replica may hold a row without the
rows it points at after any pass, settled or not.  With BATCH=n a pass reads
n notes (magic_sync.batch_notes) and closes the batch over the rows they
touch, so changes wait beyond it while replicas hold their rows' older
versions (oracle_batch.py runs it so).

    tests/e2e/run oracle.py            (SEED=n STEPS=n BATCH=n to vary)
"""
import os
import random
import time

from harness import check, finish
from walk import Shop, progress

SEED = int(os.environ.get("SEED", "20261130"))
STEPS = int(os.environ.get("STEPS", "120"))
BATCH = int(os.environ.get("BATCH", "0"))
DDL = os.environ.get("DDL", "1") == "1"
shop = Shop("oracle", random.Random(SEED), ddl=DDL)
srv, replicas = shop.srv, shop.replicas
if BATCH:
    srv.exec(f"SET magic_sync.batch_notes = {BATCH}")
passes = 0
full = 0
orphaned = 0


def sync_all():
    """A relay pass, then every replica applies, acknowledges and files, until settled."""
    global passes, full, orphaned
    for _ in range(400 if BATCH else 4):
        passes += 1
        full += srv.relay()["notes_read"] >= BATCH > 0
        moved = False
        for r in replicas:
            for applied, filed in r.sync():
                moved |= bool(applied) or (filed is not None and filed.get("filed", 0) > 0)
            orphaned += shop.orphans(r)
        if not moved and srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") == 0:
            return


started = time.time()
failures = 0
wrong_values = 0
seen = {t: 0 for t in ["orders", "order_lines", "stock", "sales", "notices", "store_lists"]}
sync_all()  # every replica provisioned before the walk writes on one
snapshots = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
for n in range(STEPS):
    shop.step()
    sync_all()
    if n % 1000 == 999:
        progress(f"step {n + 1}: {time.time() - started:.0f} s, mismatches {failures}")
    for t in seen:
        seen[t] = max(seen[t], srv.one(f"SELECT count(*) FROM {t}"))
    for r in replicas:
        wanted = srv.wanted(r.id)
        held = srv.held(r.id)
        has = shop.holds(r)
        orphans = shop.orphans(r)
        wrong = shop.added_values(r, wanted)
        if wrong:
            wrong_values += 1
            if wrong_values <= 5:
                print(f"step {n} (seed {SEED}) replica {r.id[:8]}: columns added by DDL differ: {wrong[:5]}")
        if not (held == wanted and has == wanted and orphans == 0):
            failures += 1
            if failures <= 5:
                print(f"step {n} (seed {SEED}) replica {r.id[-4:]}: held==wanted {held == wanted},"
                      f" file==wanted {has == wanted}, orphans {orphans}")
                if failures == 1:
                    for i, writes in enumerate(shop.history):
                        print(f"   step {n - len(shop.history) + 1 + i} wrote {writes}")
                for t in set(wanted) | set(held) | set(has):
                    w, h, f = wanted.get(t, set()), held.get(t, set()), has.get(t, set())
                    if w != h or w != f:
                        print(f"   {t}: wanted-held {w - h} held-wanted {h - w} file-wanted {f - w} wanted-file {w - f}")
print(f"steps: {STEPS}, {STEPS / (time.time() - started):.1f} steps/s; passes: {passes};"
      f" mismatches: {failures}, orphans: {orphaned}", flush=True)
check(f"after each of {STEPS} random steps, every replica holds exactly what it should", failures, 0)
check(f"after each of {passes} passes, no replica holds a row without its parents", orphaned, 0)
if BATCH:
    check(f"changes waited beyond the batch: {full} passes read a full batch of {BATCH}", full >= STEPS // 8, True)
check("the walk exercised every table", {t: n > 0 for t, n in seen.items()}, {t: True for t in seen})
check("every sale reached the head office",
      srv.one("SELECT count(*) FROM sales"), sum(r.one("SELECT count(*) FROM sales WHERE store = ?", (r.id,)) for r in replicas))
check("provisionings were rare: only the first", srv.one("SELECT count(*) FROM sync.epoch"), 1)
if DDL:
    check(f"the walk added {len(shop.added)} columns", len(shop.added) >= STEPS // 30, True)
    check("after each step, the columns DDL added hold the server's values on every replica", wrong_values, 0)
    check("no replica was provisioned again for a schema change",
          dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas")), snapshots)
finish()
