#!/usr/bin/python3
"""oracle.py - the plan agrees with the oracle (ARCHITECTURE "What the tests
must be able to say", 1).  A seeded random walk of writes over a schema that
uses every mirror and sync kind; after every step a relay pass, every replica
applies and acknowledges, and then:

  - what the engine records each replica holds, acknowledged, equals
    sync.wanted(replica), computed from scratch;
  - the replica's SQLite file holds exactly those rows;
  - no replica holds a row without the rows it points at.

    tests/e2e/run oracle.py            (SEED=n STEPS=n to vary)
"""
import os
import random
import tempfile

from harness import Replica, Server, check, finish

SEED = int(os.environ.get("SEED", "20261130"))
STEPS = int(os.environ.get("STEPS", "120"))
rng = random.Random(SEED)

STORES = ["aaaaaaaa-0000-4000-8000-00000000000%d" % i for i in range(1, 4)]
REGIONS = {STORES[0]: "north", STORES[1]: "south", STORES[2]: "north"}

srv = Server("oracle")
srv.exec("""
CREATE TABLE departments (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE categories (id int PRIMARY KEY, dept int NOT NULL REFERENCES departments, name text NOT NULL);
CREATE TABLE products (id int PRIMARY KEY, category int NOT NULL REFERENCES categories, name text NOT NULL,
                       discontinued boolean NOT NULL DEFAULT false);
CREATE VIEW active_products AS SELECT * FROM products WHERE NOT discontinued;
CREATE TABLE notices (id int PRIMARY KEY, region text NOT NULL, body text NOT NULL);
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, store uuid NOT NULL, customer int REFERENCES customers, note text);
CREATE TABLE order_lines (order_id int REFERENCES orders ON UPDATE CASCADE ON DELETE CASCADE, line int,
                          product int NOT NULL REFERENCES products, qty int NOT NULL, PRIMARY KEY (order_id, line));
CREATE TABLE stock (store uuid, product int REFERENCES products, qty int NOT NULL, counted int,
                    PRIMARY KEY (store, product));
CREATE TABLE price_items (id int PRIMARY KEY, product int NOT NULL REFERENCES products, price int NOT NULL);
CREATE TABLE list_members (list int, item int REFERENCES price_items ON DELETE CASCADE, PRIMARY KEY (list, item));
CREATE TABLE store_lists (store uuid, list int, PRIMARY KEY (store, list));
CREATE TABLE sales (store uuid, id int, product int NOT NULL REFERENCES products, total int NOT NULL,
                    v bigint NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('departments', 'catalog');
SELECT sync.mirror('categories', 'catalog');
SELECT sync.mirror('products', 'catalog', 'broadcast', active => 'active_products');
SELECT sync.mirror('notices', 'catalog', 'broadcast', "partition" => 'region');
SELECT sync.mirror('customers', 'catalog');
SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('price_items', 'catalog', 'grouped(members => public.list_members, assigned => public.store_lists)');
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v');
INSERT INTO departments SELECT g, 'd' || g FROM generate_series(1, 3) g;
INSERT INTO categories SELECT g, 1 + g % 3, 'c' || g FROM generate_series(1, 6) g;
INSERT INTO products SELECT g, 1 + g % 6, 'p' || g FROM generate_series(1, 12) g;
INSERT INTO customers SELECT g, 'cust' || g FROM generate_series(1, 8) g;
INSERT INTO price_items SELECT g, 1 + g % 12, 100 + g FROM generate_series(1, 10) g;
INSERT INTO list_members SELECT 1 + g % 3, g FROM generate_series(1, 10) g;
""")
for s in STORES:
    srv.exec("SELECT sync.replica_add(%s, %s)", (s, REGIONS[s]))
tmp = tempfile.mkdtemp()
replicas = [Replica(srv, s, os.path.join(tmp, f"{i}.db")) for i, s in enumerate(STORES)]

# key columns and foreign keys of each table, as the replica has them
KEYS = {
    "departments": ["id"], "categories": ["id"], "products": ["id"], "notices": ["id"], "customers": ["id"],
    "orders": ["id"], "order_lines": ["order_id", "line"], "stock": ["store", "product"], "price_items": ["id"],
    "sales": ["store", "id"],
}
FKS = [  # child, child columns, parent, parent columns
    ("categories", ["dept"], "departments", ["id"]),
    ("products", ["category"], "categories", ["id"]),
    ("orders", ["customer"], "customers", ["id"]),
    ("order_lines", ["order_id"], "orders", ["id"]),
    ("order_lines", ["product"], "products", ["id"]),
    ("stock", ["product"], "products", ["id"]),
    ("price_items", ["product"], "products", ["id"]),
    ("sales", ["product"], "products", ["id"]),
]
next_id = {"products": 100, "orders": 1, "notices": 1, "price_items": 100, "customers": 100, "sales": 1}


def new_id(t):
    next_id[t] += 1
    return next_id[t]


def pick(sql):
    rows = srv.rows(sql)
    return rng.choice(rows)[0] if rows else None


def step():
    """One random write, on the server or at a store."""
    kind = rng.randrange(20)
    store = rng.choice(STORES)
    if kind == 0:
        srv.exec("INSERT INTO products VALUES (%s, %s, 'new')", (new_id("products"), rng.randint(1, 6)))
    elif kind == 1:
        srv.exec("UPDATE products SET name = name || '+' WHERE id = %s", (pick("SELECT id FROM products"),))
    elif kind == 2:  # moves a product to another category (a parent two levels up changes)
        srv.exec("UPDATE products SET category = %s WHERE id = %s", (rng.randint(1, 6), pick("SELECT id FROM products")))
    elif kind == 3:  # out of the active view, or back
        srv.exec("UPDATE products SET discontinued = NOT discontinued WHERE id = %s", (pick("SELECT id FROM products"),))
    elif kind == 4:
        srv.exec("INSERT INTO notices VALUES (%s, %s, 'n')", (new_id("notices"), rng.choice(["north", "south"])))
    elif kind == 5:  # a notice moves partition
        srv.exec("UPDATE notices SET region = CASE region WHEN 'north' THEN 'south' ELSE 'north' END WHERE id = %s",
                 (pick("SELECT id FROM notices"),))
    elif kind in (6, 7):
        oid = new_id("orders")
        srv.exec("INSERT INTO orders VALUES (%s, %s, %s)", (oid, store, rng.choice([None] + list(range(1, 9)))))
        for line in range(rng.randint(0, 3)):
            srv.exec("INSERT INTO order_lines SELECT %s, %s, id, 1 FROM products ORDER BY random() LIMIT 1", (oid, line))
    elif kind == 8:  # an order moves to another store: its lines follow, its customer too
        srv.exec("UPDATE orders SET store = %s WHERE id = %s", (store, pick("SELECT id FROM orders")))
    elif kind == 9:
        srv.exec("UPDATE orders SET customer = %s WHERE id = %s", (rng.randint(1, 8), pick("SELECT id FROM orders")))
    elif kind == 10:
        srv.exec("DELETE FROM orders WHERE id = %s", (pick("SELECT id FROM orders"),))
    elif kind == 11:  # a key change cascades to the lines
        oid = pick("SELECT id FROM orders")
        if oid is not None:
            srv.exec("UPDATE orders SET id = %s WHERE id = %s", (new_id("orders"), oid))
    elif kind == 12:
        srv.exec("DELETE FROM order_lines WHERE (order_id, line) IN (SELECT order_id, line FROM order_lines ORDER BY random() LIMIT 1)")
    elif kind == 13:
        srv.exec("INSERT INTO stock VALUES (%s, %s, 5) ON CONFLICT DO NOTHING", (store, pick("SELECT id FROM products")))
    elif kind == 14:  # a group given to a store, or taken from it
        lst = rng.randint(1, 3)
        if srv.one("SELECT count(*) FROM store_lists WHERE store = %s AND list = %s", (store, lst)):
            srv.exec("DELETE FROM store_lists WHERE store = %s AND list = %s", (store, lst))
        else:
            srv.exec("INSERT INTO store_lists VALUES (%s, %s)", (store, lst))
    elif kind == 15:  # a member joins or leaves a group
        item, lst = pick("SELECT id FROM price_items"), rng.randint(1, 3)
        if srv.one("SELECT count(*) FROM list_members WHERE list = %s AND item = %s", (lst, item)):
            srv.exec("DELETE FROM list_members WHERE list = %s AND item = %s", (lst, item))
        else:
            srv.exec("INSERT INTO list_members VALUES (%s, %s)", (lst, item))
    elif kind == 16:
        srv.exec("INSERT INTO price_items VALUES (%s, %s, 1)", (new_id("price_items"), pick("SELECT id FROM products")))
    elif kind == 17:  # a sale at a store, filed up
        r = replicas[STORES.index(store)]
        products = [x[0] for x in r.q("SELECT id FROM products")]
        if products:
            r.q("INSERT INTO sales VALUES (?, ?, ?, ?, 1)", (store, new_id("sales"), rng.choice(products), rng.randint(1, 50)))
    elif kind == 18:  # a store counts its stock (a column of its own)
        r = replicas[STORES.index(store)]
        r.q("UPDATE stock SET counted = qty - 1 WHERE product = (SELECT product FROM stock ORDER BY random() LIMIT 1)")
    else:
        srv.exec("UPDATE customers SET name = name || '.' WHERE id = %s", (rng.randint(1, 8),))


def sync_all():
    """A relay pass, then every replica applies, acknowledges and files, until settled."""
    for _ in range(4):
        srv.relay()
        moved = False
        for r in replicas:
            for applied, filed in r.sync():
                moved |= bool(applied) or (filed is not None and filed.get("filed", 0) > 0)
        if not moved and srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") == 0:
            return


def orphans(r):
    """Rows the replica holds whose parent it does not hold."""
    bad = 0
    for child, ccols, parent, pcols in FKS:
        cond = " AND ".join(f'p."{pc}" = c."{cc}"' for cc, pc in zip(ccols, pcols))
        notnull = " AND ".join(f'c."{cc}" IS NOT NULL' for cc in ccols)
        bad += r.one(f'SELECT count(*) FROM "{child}" c WHERE {notnull} AND NOT EXISTS (SELECT 1 FROM "{parent}" p WHERE {cond})')
    return bad


failures = 0
seen = {t: 0 for t in ["orders", "order_lines", "stock", "sales", "notices", "store_lists"]}
for n in range(STEPS):
    step()
    sync_all()
    for t in seen:
        seen[t] = max(seen[t], srv.one(f"SELECT count(*) FROM {t}"))
    for r in replicas:
        wanted = srv.wanted(r.id)
        held = srv.held(r.id)
        ok = held == wanted
        has = {t: r.keys(t, KEYS[t]) for t in KEYS}
        has = {t: k for t, k in has.items() if k}
        ok_file = has == wanted
        no_orphans = orphans(r) == 0
        if not (ok and ok_file and no_orphans):
            failures += 1
            if failures <= 5:
                print(f"step {n} (seed {SEED}) replica {r.id[:8]}: held==wanted {ok}, file==wanted {ok_file}, "
                      f"orphans {orphans(r)}")
                for t in set(wanted) | set(held) | set(has):
                    if wanted.get(t, set()) != held.get(t, set()) or wanted.get(t, set()) != has.get(t, set()):
                        print(f"   {t}: wanted-held {wanted.get(t, set()) - held.get(t, set())}"
                              f" held-wanted {held.get(t, set()) - wanted.get(t, set())}"
                              f" file-wanted {has.get(t, set()) - wanted.get(t, set())}"
                              f" wanted-file {wanted.get(t, set()) - has.get(t, set())}")
check(f"after each of {STEPS} random steps, every replica holds exactly what it should", failures, 0)
check("the walk exercised every table", {t: n > 0 for t, n in seen.items()}, {t: True for t in seen})
check("every sale reached the head office",
      srv.one("SELECT count(*) FROM sales"), sum(r.one("SELECT count(*) FROM sales WHERE store = ?", (r.id,)) for r in replicas))
check("provisionings were rare: only the first", srv.one("SELECT count(*) FROM sync.epoch"), 1)
finish()
