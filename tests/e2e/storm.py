#!/usr/bin/python3
"""storm.py - the walk of oracle.py through the real relay and real SQLite
replicas while everything fails (docs/design.md 9, the storm): the transport loses messages, delivers them out of order and
refuses pulls and uploads; relay passes are cancelled mid-way (the lock's
connection lost: nothing commits); replicas crash before acknowledging what
they applied, or lose the answers to their uploads; a codec bug is deployed
and later fixed; so is a bug of the active view that fails the plan of a row
(its notes are parked, and snapshots set aside).  When the faults stop:

  - every replica's digest equals what the server records it holds;
  - every replica holds exactly its wanted set, in its file, without orphans;
  - no committed change is lost: every sale a store wrote is at the head
    office;
  - provisionings were rare.

    tests/e2e/run storm.py            (SEED=n STEPS=n to vary)
"""
import json
import os
import random

import psycopg2

from harness import check, finish
from walk import STORES, Shop

SEED = int(os.environ.get("SEED", "42"))
STEPS = int(os.environ.get("STEPS", "100"))
rng = random.Random(SEED)
shop = Shop("storm", random.Random(SEED + 1))
srv, replicas = shop.srv, shop.replicas
faults = {"lost": 0, "reordered": 0, "pull refused": 0, "upload refused": 0, "answer lost": 0,
          "pass cancelled": 0, "crashed before acknowledging": 0, "codec bug": 0, "planning bug": 0}



def deploy(buggy):
    """The codec of a product's label: a bug that cannot encode 'special', or the fix."""
    body = ("BEGIN IF l = 'special' THEN RAISE EXCEPTION 'the codec cannot encode %', l; END IF;"
            " RETURN to_json(l::text); END" if buggy else "BEGIN RETURN to_json(l::text); END")
    srv.exec(f"CREATE OR REPLACE FUNCTION product_label_json(l product_label) RETURNS json"
             f" LANGUAGE plpgsql IMMUTABLE AS $$ {body} $$")


def deploy_view(buggy):
    """Which products are shown: a bug that raises on one named 'unplannable', or the fix."""
    body = ("BEGIN IF p.name = 'unplannable' THEN RAISE EXCEPTION 'the view cannot plan product %', p.id;"
            " END IF; RETURN true; END" if buggy else "BEGIN RETURN true; END")
    srv.exec(f"CREATE OR REPLACE FUNCTION planned(p products) RETURNS boolean"
             f" LANGUAGE plpgsql STABLE AS $$ {body} $$")


deploy_view(False)
srv.exec("CREATE OR REPLACE VIEW active_products AS SELECT * FROM products p WHERE NOT discontinued AND planned(p)")


def relay(storm):
    """A pass; in the storm, sometimes cancelled mid-way (nothing commits)."""
    if storm and rng.random() < 0.15:
        srv.exec("SET statement_timeout = %s", (rng.choice([1, 2, 5, 10]),))
        try:
            srv.relay()
        except psycopg2.Error:
            faults["pass cancelled"] += 1
        finally:
            srv.exec("RESET statement_timeout")
    else:
        srv.relay()


def replica_round(r, storm):
    """What the transport does for one replica in one round."""
    if storm and rng.random() < 0.1:
        faults["pull refused"] += 1
        messages = []
    else:
        messages = [bytes(m) for _, m in srv.pull(r.id, r.status()["applied"], applied=r.applied())]
    if storm and len(messages) > 1 and rng.random() < 0.2:
        i = rng.randrange(len(messages))
        if rng.random() < 0.5:
            del messages[i]
            faults["lost"] += 1
        else:
            messages.insert(rng.randrange(len(messages)), messages.pop(i))
            faults["reordered"] += 1
    for m in messages:
        result = r.apply(m)["result"]
        if result in ("gap", "later_protocol", "wrong_replica"):
            break
    if storm and rng.random() < 0.1:
        # crashed before acknowledging: the file keeps what it applied, nothing goes up
        r.close()
        r.open()
        faults["crashed before acknowledging"] += 1
        return
    up = r.one("SELECT sync_upload()")
    if up is None:
        return
    if storm and rng.random() < 0.1:
        faults["upload refused"] += 1  # it goes again later: the notes wait for an answer
        return
    srv.file(r.id, bytes(up))
    if storm and rng.random() < 0.1:
        # the answer is lost: delivered to nobody
        srv.exec("DELETE FROM sync.answers WHERE replica = %s", (r.id,))
        faults["answer lost"] += 1


for n in range(STEPS):
    shop.step()
    if n == STEPS // 4:
        # a bug is deployed, and the rows it cannot encode appear: they are quarantined
        deploy(True)
        srv.exec("UPDATE products SET label = 'special' WHERE id IN (1, 2)")
        faults["codec bug"] += 1
    if n == STEPS // 2:
        # a bug of the view is deployed, and the row it cannot plan changes: its notes are parked
        deploy_view(True)
        srv.exec("UPDATE products SET name = 'unplannable' WHERE id = 3")
        faults["planning bug"] += 1
    relay(True)
    for r in replicas:
        replica_round(r, True)

# the faults stop, the fixes are deployed: what was set aside goes by itself,
# once its minute is up (here: moved back)
quarantined = srv.one("SELECT count(*) FROM sync.quarantine")
parked = srv.one("SELECT count(*) FROM sync.notes WHERE parked IS NOT NULL")
deploy(False)
deploy_view(False)
srv.exec("SELECT sync.quarantine_retry()")
srv.exec("UPDATE sync.notes SET parked_at = parked_at - interval '2 minutes' WHERE parked IS NOT NULL")
srv.exec("UPDATE sync.replicas SET provision_failed_at = provision_failed_at - interval '2 minutes'")
for r in replicas:
    r.q("UPDATE _sync_state SET digest_due = 1")
    r.one("SELECT sync_config('resend_after', 0)")
for _ in range(12):
    relay(False)
    for r in replicas:
        replica_round(r, False)
        r.q("UPDATE _sync_state SET digest_due = 1")

print("faults:", json.dumps(faults), flush=True)
check("the storm had every kind of fault", all(v > 0 for v in faults.values()), True)
check("the codec bug set rows aside", quarantined > 0, True)
check("and the fix let them through", srv.one("SELECT count(*) FROM sync.quarantine"), 0)
check("the planning bug parked notes", parked > 0, True)
check("and the fix let them through", srv.one("SELECT count(*) FROM sync.notes WHERE parked IS NOT NULL"), 0)
check("no snapshot is left set aside", srv.one("SELECT count(*) FROM sync.replicas WHERE provision"), 0)
for r in replicas:
    wanted = srv.wanted(r.id)
    check(f"{r.id[:8]} holds what it should (the engine's record)", srv.held(r.id), wanted)
    check(f"{r.id[:8]} holds what it should (its file)", shop.holds(r), wanted)
    check(f"{r.id[:8]} holds no row without its parents", shop.orphans(r), 0)
    digests = r.digest()
    server = {t: {"count": c, "fnv": f} for t, c, f in srv.rows(
        "SELECT t.name, (d).count, (d).fnv FROM (SELECT tab, sync.digest(key) d FROM sync.held"
        " WHERE replica = %s AND taken IS NULL AND refused IS NULL GROUP BY tab) s JOIN sync.tables t ON t.id = s.tab",
        (r.id,))}
    check(f"{r.id[:8]} digests equal the server's record",
          {t: d for t, d in digests.items() if d["count"]}, server)
    check(f"{r.id[:8]} has nothing left to send", r.one("SELECT count(*) FROM _sync_notes"), 0)
check("no committed change is lost: every sale a store wrote is at the head office",
      sorted(srv.rows("SELECT store::text, id FROM sales")),
      sorted((s, i) for r in replicas for s, i in r.q("SELECT store, id FROM sales WHERE store = ?", (r.id,))))
provisioned = srv.one("SELECT count(*) FROM sync.epoch")
print(f"epochs: {provisioned}", flush=True)
check("provisionings were rare: no new epoch", provisioned, 1)
finish()
