#!/usr/bin/python3
"""fast.py - the fast path plans what the full plan plans (src/pg/relay/fast.c).

A seeded random walk over a schema whose broadcast tables are on the fast path
(tags, products: no partition, no active view, no foreign key, nothing follows
them) and some that are not (kinds, which kind_notes follows; offers, which
points at products), with assigned items pointing at both.  Each step writes a
few rows (changed in place, made, deleted, their keys changed, items moved and
pointed elsewhere), now and then registers a replica, and leaves a replica
behind for a few steps, or most of them not live for a few.  Then, in one REPEATABLE READ transaction, the pass is
planned twice in the same snapshot: once with magic_sync.full_plan (every
wanted set compared whole), rolled back to a savepoint, then as the relay plans
(around what changed, with the fast path), and committed.  Both must record
the same: every held row (version, let go or not, refused, replacing, written
by this pass or not), the rows each replica's messages carry of each table
(sync.carried, which the reads count), and the same message bodies to the same
replicas.  The replicas then apply and acknowledge what they were sent, and
what the engine records each holds is checked against sync.wanted now and then.

    tests/e2e/run fast.py            (SEED=n STEPS=n to vary)
"""
import os
import random
import uuid

from harness import Replica, Server, check, finish, settle

SEED = int(os.environ.get("SEED", "20261201"))
STEPS = int(os.environ.get("STEPS", "150"))
rng = random.Random(SEED)

SCHEMA = """
CREATE TABLE tags (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price int NOT NULL);
CREATE TABLE kinds (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE kind_notes (id int PRIMARY KEY, kind int NOT NULL REFERENCES kinds ON UPDATE CASCADE ON DELETE CASCADE,
                         body text NOT NULL);
CREATE TABLE offers (id int PRIMARY KEY, product int NOT NULL REFERENCES products ON UPDATE CASCADE ON DELETE CASCADE,
                     pct int NOT NULL);
CREATE TABLE items (id int PRIMARY KEY, store uuid NOT NULL,
                    product int REFERENCES products ON UPDATE CASCADE ON DELETE SET NULL,
                    tag int REFERENCES tags ON UPDATE CASCADE ON DELETE SET NULL,
                    kind int REFERENCES kinds ON UPDATE CASCADE ON DELETE SET NULL, qty int NOT NULL);
INSERT INTO tags SELECT g, 't' || g FROM generate_series(1, 8) g;
INSERT INTO products SELECT g, 'p' || g, g FROM generate_series(1, 20) g;
INSERT INTO kinds SELECT g, 'k' || g FROM generate_series(1, 5) g;
INSERT INTO kind_notes SELECT g, 1 + g % 5, 'n' || g FROM generate_series(1, 10) g;
INSERT INTO offers SELECT g, 1 + g % 20, g FROM generate_series(1, 6) g;
SELECT sync.mirror('tags', 'catalog', 'broadcast');
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('kinds', 'catalog', 'broadcast');
SELECT sync.mirror('kind_notes', 'catalog', 'follows(kind)');
SELECT sync.mirror('offers', 'catalog', 'broadcast');
SELECT sync.mirror('items', 'catalog', 'assigned(store)');
"""

srv = Server("fast")
srv.exec(SCHEMA)
stores = [str(uuid.UUID(int=i + 1)) for i in range(3)]
replicas = []
for s in stores:
    srv.exec("SELECT sync.replica_add(%s)", (s,))
    replicas.append(Replica(srv, s))
srv.exec("INSERT INTO items SELECT g, (%s::uuid[])[1 + g %% 3], 1 + g %% 20, 1 + g %% 8, 1 + g %% 5, g"
         " FROM generate_series(1, 30) g", (stores,))

# the epoch begins, every replica provisioned: the walk plans changes
settle(srv, replicas)


def ids(table):
    return [r[0] for r in srv.rows(f"SELECT id FROM {table} ORDER BY id")]


def fresh(table):
    return (srv.one(f"SELECT coalesce(max(id), 0) FROM {table}") or 0) + 1 + rng.randrange(3)


def pick(table):
    xs = ids(table)
    return rng.choice(xs) if xs else None


def write():
    """One random write; what it was, for a failure's message."""
    w = rng.random()
    v = rng.randrange(1000)
    if w < 0.30:
        t = rng.choice(["products", "tags"])
        k = pick(t)
        col = "price" if t == "products" and rng.random() < 0.5 else "name"
        srv.exec(f"UPDATE {t} SET {col} = %s WHERE id = %s", (v if col == "price" else f"x{v}", k))
        return f"{t} {k} in place"
    if w < 0.40:
        t = rng.choice(["products", "tags", "kinds"])
        k = fresh(t)
        srv.exec(f"INSERT INTO {t} VALUES (%s, %s{', 1' if t == 'products' else ''})", (k, f"new{v}"))
        return f"{t} {k} made"
    if w < 0.47:
        t = rng.choice(["products", "tags", "kinds"])
        k = pick(t)
        srv.exec(f"DELETE FROM {t} WHERE id = %s", (k,))
        return f"{t} {k} deleted"
    if w < 0.54:
        t = rng.choice(["products", "tags", "kinds"])
        k, n = pick(t), fresh(t)
        srv.exec(f"UPDATE {t} SET id = %s WHERE id = %s", (n, k))
        return f"{t} {k} -> {n}"
    if w < 0.62:
        k = pick("kinds")
        srv.exec("UPDATE kinds SET name = %s WHERE id = %s", (f"k{v}", k))
        return f"kinds {k} in place"
    if w < 0.68:
        k, kind = pick("kind_notes"), pick("kinds")
        if k is None or kind is None:
            return "nothing"
        srv.exec("UPDATE kind_notes SET kind = %s, body = %s WHERE id = %s", (kind, f"b{v}", k))
        return f"kind_notes {k} -> kind {kind}"
    if w < 0.72:
        product = pick("products")
        if product is None:
            return "nothing"
        k = fresh("offers")
        srv.exec("INSERT INTO offers VALUES (%s, %s, %s)", (k, product, v))
        return f"offers {k} made at {product}"
    if w < 0.75:
        k = pick("offers")
        srv.exec("UPDATE offers SET pct = %s WHERE id = %s", (v, k))
        return f"offers {k} in place"
    k = pick("items")
    what = rng.random()
    if k is None or what < 0.15:
        k = fresh("items")
        srv.exec("INSERT INTO items VALUES (%s, %s, %s, %s, %s, 1)",
                 (k, rng.choice(stores), pick("products"), pick("tags"), pick("kinds")))
        return f"items {k} made"
    if what < 0.25:
        srv.exec("DELETE FROM items WHERE id = %s", (k,))
        return f"items {k} deleted"
    if what < 0.45:
        s = rng.choice(stores)
        srv.exec("UPDATE items SET store = %s WHERE id = %s", (s, k))
        return f"items {k} moved to {s}"
    col = rng.choice(["product", "tag", "kind"])
    to = pick({"product": "products", "tag": "tags", "kind": "kinds"}[col])
    srv.exec(f"UPDATE items SET {col} = %s, qty = qty + 1 WHERE id = %s", (to, k))
    return f"items {k} {col} -> {to}"


HELD = ("SELECT replica, tab, key, note, taken IS NOT NULL, refused, replace, number > %s, since > %s"
        " FROM sync.held ORDER BY replica, tab, key")
# what the reads count of each replica's messages (sync.carried), by table: of this pass's or earlier ones
CARRIED = ("SELECT replica, tab, number > %s, sum(rows) FROM sync.carried GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
SENT = ("SELECT o.replica, b.hash, b.upserts, b.deletes FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body"
        " WHERE o.number > %s ORDER BY 1, 2")


def recorded(c, full):
    """One pass, with magic_sync.full_plan or not; what it recorded."""
    c.execute("SELECT last_value FROM sync.message_seq")
    before = c.fetchone()[0]
    c.execute(f"SET LOCAL magic_sync.full_plan = {'on' if full else 'off'}")
    c.execute("SET LOCAL client_min_messages = debug1")
    del srv.conn.notices[:]
    c.execute("SELECT * FROM sync.relay_pass()")
    c.execute("SET LOCAL client_min_messages = error")
    fast = sum(int(n.split("magic_sync: ")[1].split()[0]) for n in srv.conn.notices if "on the fast path" in n)
    for n in srv.conn.notices:
        if "held versions looked up by" in n and not full:
            lookups[n.split()[-1]] += 1
        if "replicas holding no version of them" in n and not full:
            unheld[0] += int(n.split("magic_sync: ")[1].split()[0])
        if "held by some of the replicas around" in n and not full:
            unheld[1] += int(n.split("magic_sync: ")[1].split()[0])
        if "sent as they were found" in n and not full:
            unheld[2] += 1
        if "notes read by probe" in n and not full:
            probed[0] += 1
        if "held rows sent again updated in C" in n and not full:
            probed[1] += int(n.split("magic_sync: ")[1].split()[0])
        if "the batch written in C" in n and not full:
            probed[2] += 1
    c.execute(HELD, (before, before))
    held = c.fetchall()
    c.execute(CARRIED, (before,))
    held += [("carried",) + r for r in c.fetchall()]
    c.execute(SENT, (before,))
    return held, c.fetchall(), fast


def both_plans(step, writes):
    """The pass planned whole, rolled back, then planned as the relay does and kept; whether they agree."""
    with srv.conn.cursor() as c:
        c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        c.execute("SAVEPOINT whole")
        held_full, sent_full, _ = recorded(c, True)
        c.execute("ROLLBACK TO SAVEPOINT whole")
        held_fast, sent_fast, fast = recorded(c, False)
        c.execute("COMMIT")
    same = held_full == held_fast and sent_full == sent_fast
    if not same:
        a, b = set(held_full), set(held_fast)
        print(f"step {step} ({'; '.join(writes)}): the plans differ;"
              f" held only by the full plan {sorted(a - b)[:6]}, only by this one {sorted(b - a)[:6]};"
              f" messages {len(sent_full)} vs {len(sent_fast)}", flush=True)
    return same, fast


agreed = 0
fast_rows = 0
behind = {}
# replicas not live until a step: with most of them so, the fast path looks
# their held versions up one replica at a time (held_pkey), else by the row (held_row)
down = {}
rebirth = {}
lookups = {"held_row": 0, "held_pkey": 0}
# sends to replicas that hold no version of the row: recorded without looking
# for a held row to update (a held row there makes the pass fail); and rows
# that some of the replicas around hold and others do not (rebirth, below)
unheld = [0, 0, 0]
# passes whose notes a probe read (batch_probe.c); under the full plan the
# statement reads them too, and the pass fails where they differ; and held
# rows sent again updated in C (held_update.c), and passes whose messages
# were written in C (batch_write.c), compared with the full plan's
probed = [0, 0, 0]
for step in range(STEPS):
    for i, until in list(down.items()):
        if until < step:
            srv.exec("SELECT sync.replica_set(%s, live => true)", (replicas[i].id,))
            del down[i]
    if not down and rng.random() < 0.08:
        for i in rng.sample(range(len(replicas)), len(replicas) // 2 + 1):
            down[i] = step + rng.randrange(2, 6)
            srv.exec("SELECT sync.replica_set(%s, live => false)", (replicas[i].id,))
    # a step that makes a row again writes nothing else: the pass plans
    # nothing but the fast path
    writes = [] if step in rebirth else [write() for _ in range(1 + rng.randrange(4))]
    if rng.random() < 0.04:
        s = str(uuid.UUID(int=len(stores) + 1))
        stores.append(s)
        srv.exec("SELECT sync.replica_add(%s)", (s,))
        replicas.append(Replica(srv, s))
        writes.append(f"replica {s} added")
    if step in rebirth:
        t, k = rebirth.pop(step)
        srv.exec(f"INSERT INTO {t} VALUES (%s, 'again'{', 1' if t == 'products' else ''}) ON CONFLICT DO NOTHING", (k,))
        writes.append(f"{t} {k} made again")
    if rng.random() < 0.1:
        i = rng.randrange(len(replicas))
        behind[i] = until = step + rng.randrange(2, 6)
        # a row deleted now and made again while that replica is behind: then
        # the replicas that acknowledged the delete hold no version of it,
        # and the one behind holds one it is letting go
        t = rng.choice(["products", "tags"])
        k = pick(t)
        if k is not None and i not in down:
            srv.exec(f"DELETE FROM {t} WHERE id = %s", (k,))
            writes.append(f"{t} {k} deleted, to be made again")
            rebirth.setdefault(step + 1 + rng.randrange(until - step), (t, k))
    same, fast = both_plans(step, writes)
    agreed += same
    fast_rows += fast
    for i, r in enumerate(replicas):
        if behind.get(i, -1) < step and i not in down:
            r.sync()
    if step % 25 == 24 or step == STEPS - 1:
        for i, r in enumerate(replicas):
            if behind.get(i, -1) < step and i not in down:
                check(f"step {step}: replica {r.id} holds what it wants", srv.held(r.id), srv.wanted(r.id))

check("every step planned the same with the fast path as with the full plan", agreed, STEPS)
# the walk tried the fast path on many rows, or it checked nothing about it
check("rows planned on the fast path (more than a step in three)", fast_rows > STEPS // 3, True)
# and looked their held versions up both ways
check("passes that looked held versions up by held_row and by held_pkey, each more than once",
      min(lookups.values()) > 1, True)
check("fast-path sends to replicas holding no version of the row (more than one)", unheld[0] > 1, True)
check("fast rows held by some of the replicas around and not others (more than one)", unheld[1] > 1, True)
# a batch of fast rows alone, sent by the statement that found them (fast.c)
check("passes whose fast rows were sent as they were found (more than one)", unheld[2] > 1, True)
check("passes whose notes were read by probe (more than half the steps)", probed[0] > STEPS // 2, True)
check("held rows sent again updated in C (more than ten)", probed[1] > 10, True)
check("passes whose messages were written in C (more than half the steps)", probed[2] > STEPS // 2, True)
print(f"{STEPS} steps, {fast_rows} rows on the fast path, {len(replicas)} replicas; held versions by {lookups};"
      f" {unheld[0]} sent to replicas holding none, {unheld[1]} rows held by some,"
      f" {unheld[2]} passes sent as found, {probed[0]} read by probe, {probed[1]} held rows updated in C, {probed[2]} batches written in C")
finish()
