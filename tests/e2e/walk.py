"""walk.py - the shop the random walks run over (oracle.py, storm.py): a
schema with every mirror and sync kind, three stores, and one random write at
a time, at the head office or at a store."""
import fcntl
import os
import tempfile

from harness import Replica, Server

STORES = ["aaaaaaaa-0000-4000-8000-00000000000%d" % i for i in range(1, 4)]
REGIONS = {STORES[0]: "north", STORES[1]: "south", STORES[2]: "north"}

SCHEMA = """CREATE TABLE departments (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE categories (id int PRIMARY KEY, dept int NOT NULL REFERENCES departments, name text NOT NULL);
-- how a label becomes JSON is code the storm deploys a bug into, and fixes
CREATE TYPE product_label AS ENUM ('plain', 'special');
CREATE FUNCTION product_label_json(l product_label) RETURNS json LANGUAGE sql IMMUTABLE AS $$ SELECT to_json(l::text) $$;
CREATE CAST (product_label AS json) WITH FUNCTION product_label_json(product_label);
CREATE TABLE products (id int PRIMARY KEY, category int NOT NULL REFERENCES categories, name text NOT NULL,
                       discontinued boolean NOT NULL DEFAULT false, label product_label NOT NULL DEFAULT 'plain');
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
-- a notice of each region: a replica's partition must be one the fleet knows
INSERT INTO notices VALUES (1, 'north', 'n'), (0, 'south', 'n');
"""

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


def release_lock():
    """The long walk (tests/e2e/long.sh) lets other trees install once its one
    connection to the server has loaded the extension: it takes hours, and
    uses no other connection, nor the installed files, after that.  The lock
    is the one tests/e2e/run took (scripts/lib.sh: descriptor 9)."""
    if not os.environ.get("MAGIC_SYNC_LONG_UNLOCK"):
        return
    try:
        held = os.readlink("/proc/self/fd/9") == "/tmp/magic_sync-pg.lock"
    except OSError:
        held = False
    if held:
        fcntl.flock(9, fcntl.LOCK_UN)
        print("the long walk lets other trees install", flush=True)
    else:
        print("the long walk keeps the lock: descriptor 9 is not it", flush=True)


def progress(line):
    """A line of the walk's progress: printed, and for the long walk written at
    once where long.sh shows it (tests/e2e/run says what a script said when it ends)."""
    print(line, flush=True)
    if os.environ.get("LONG_PROGRESS"):
        with open(os.environ["LONG_PROGRESS"], "a") as f:
            print(line, file=f)

# tables a walk with DDL adds columns to: every mirrored table but the record
# (the stores write its rows whole, by position)
EVOLVING = ["departments", "categories", "products", "notices", "customers", "orders", "order_lines", "stock",
            "price_items"]


class Shop:
    def __init__(self, name, rng, ddl=False):
        self.rng = rng
        self.ddl = ddl
        self.added = []            # (table, column) the walk added
        self.srv = Server(name)
        self.srv.exec(SCHEMA)
        for s in STORES:
            self.srv.exec("SELECT sync.replica_add(%s, %s)", (s, REGIONS[s]))
        tmp = tempfile.mkdtemp()
        self.replicas = [Replica(self.srv, s, os.path.join(tmp, f"{i}.db")) for i, s in enumerate(STORES)]
        self.next_id = {"products": 100, "orders": 1, "notices": 1, "price_items": 100, "customers": 100, "sales": 1}
        release_lock()

    def new_id(self, t):
        self.next_id[t] += 1
        return self.next_id[t]

    def pick(self, sql):
        rows = self.srv.rows(sql)
        return self.rng.choice(rows)[0] if rows else None

    def write(self, sql, args=None):
        """A write at the head office, remembered with the step's (history)."""
        self.history[-1].append((sql, args))
        self.srv.exec(sql, args)

    def evolve(self):
        """Random additive DDL on a mirrored table: a column with a default evaluated once
        (every row takes it), without one (NULL), or with values row by row (a volatile
        default: the rows go again)."""
        t = self.rng.choice(EVOLVING)
        col = f"x{len(self.added) + 1}"
        kind = self.rng.randrange(4)
        if kind == 0:
            ddl = f"ALTER TABLE {t} ADD COLUMN {col} int NOT NULL DEFAULT {self.rng.randint(0, 9)}"
        elif kind == 1:
            ddl = f"ALTER TABLE {t} ADD COLUMN {col} text"
        elif kind == 2:
            ddl = f"ALTER TABLE {t} ADD COLUMN {col} int DEFAULT (random() * 1000)::int"
        else:
            ddl = f"ALTER TABLE {t} ADD COLUMN {col} text NOT NULL DEFAULT 'v{len(self.added)}'"
        self.srv.exec(ddl)
        self.added.append((t, col))
        return ddl

    def step(self):
        """One random write, on the server or at a store; now and then, with ddl, a column added."""
        # the writes of the last steps, for saying what led to a mismatch
        self.history = getattr(self, "history", [])[-9:] + [[]]
        if self.ddl and self.rng.randrange(12) == 0:
            return self.evolve()
        kind = self.rng.randrange(20)
        store = self.rng.choice(STORES)
        if kind == 0:
            self.write("INSERT INTO products VALUES (%s, %s, 'new')", (self.new_id("products"), self.rng.randint(1, 6)))
        elif kind == 1:
            self.write("UPDATE products SET name = name || '+' WHERE id = %s", (self.pick("SELECT id FROM products"),))
        elif kind == 2:  # moves a product to another category (a parent two levels up changes)
            self.write("UPDATE products SET category = %s WHERE id = %s", (self.rng.randint(1, 6), self.pick("SELECT id FROM products")))
        elif kind == 3:  # out of the active view, or back
            self.write("UPDATE products SET discontinued = NOT discontinued WHERE id = %s", (self.pick("SELECT id FROM products"),))
        elif kind == 4:
            self.write("INSERT INTO notices VALUES (%s, %s, 'n')", (self.new_id("notices"), self.rng.choice(["north", "south"])))
        elif kind == 5:  # a notice moves partition
            self.write("UPDATE notices SET region = CASE region WHEN 'north' THEN 'south' ELSE 'north' END WHERE id = %s",
                     (self.pick("SELECT id FROM notices"),))
        elif kind in (6, 7):
            oid = self.new_id("orders")
            self.write("INSERT INTO orders VALUES (%s, %s, %s)", (oid, store, self.rng.choice([None] + list(range(1, 9)))))
            for line in range(self.rng.randint(0, 3)):
                self.write("INSERT INTO order_lines SELECT %s, %s, id, 1 FROM products ORDER BY random() LIMIT 1", (oid, line))
        elif kind == 8:  # an order moves to another store: its lines follow, its customer too
            self.write("UPDATE orders SET store = %s WHERE id = %s", (store, self.pick("SELECT id FROM orders")))
        elif kind == 9:
            self.write("UPDATE orders SET customer = %s WHERE id = %s", (self.rng.randint(1, 8), self.pick("SELECT id FROM orders")))
        elif kind == 10:
            self.write("DELETE FROM orders WHERE id = %s", (self.pick("SELECT id FROM orders"),))
        elif kind == 11:  # a key change cascades to the lines
            oid = self.pick("SELECT id FROM orders")
            if oid is not None:
                self.write("UPDATE orders SET id = %s WHERE id = %s", (self.new_id("orders"), oid))
        elif kind == 12:
            self.write("DELETE FROM order_lines WHERE (order_id, line) IN (SELECT order_id, line FROM order_lines ORDER BY random() LIMIT 1)")
        elif kind == 13:
            self.write("INSERT INTO stock VALUES (%s, %s, 5) ON CONFLICT DO NOTHING", (store, self.pick("SELECT id FROM products")))
        elif kind == 14:  # a group given to a store, or taken from it
            lst = self.rng.randint(1, 3)
            if self.srv.one("SELECT count(*) FROM store_lists WHERE store = %s AND list = %s", (store, lst)):
                self.write("DELETE FROM store_lists WHERE store = %s AND list = %s", (store, lst))
            else:
                self.write("INSERT INTO store_lists VALUES (%s, %s)", (store, lst))
        elif kind == 15:  # a member joins or leaves a group
            item, lst = self.pick("SELECT id FROM price_items"), self.rng.randint(1, 3)
            if self.srv.one("SELECT count(*) FROM list_members WHERE list = %s AND item = %s", (lst, item)):
                self.write("DELETE FROM list_members WHERE list = %s AND item = %s", (lst, item))
            else:
                self.write("INSERT INTO list_members VALUES (%s, %s)", (lst, item))
        elif kind == 16:
            self.write("INSERT INTO price_items VALUES (%s, %s, 1)", (self.new_id("price_items"), self.pick("SELECT id FROM products")))
        elif kind == 17:  # a sale at a store, filed up
            r = self.replicas[STORES.index(store)]
            products = [x[0] for x in r.q("SELECT id FROM products")] if r.provisioned() else []
            if products:
                self.history[-1].append(("store sale", store))
                r.q("INSERT INTO sales VALUES (?, ?, ?, ?, 1)", (store, self.new_id("sales"), self.rng.choice(products), self.rng.randint(1, 50)))
        elif kind == 18:  # a store counts its stock (a column of its own)
            r = self.replicas[STORES.index(store)]
            if r.provisioned():
                self.history[-1].append(("store counts", store))
                r.q("UPDATE stock SET counted = qty - 1 WHERE product = (SELECT product FROM stock ORDER BY random() LIMIT 1)")
        else:
            self.write("UPDATE customers SET name = name || '.' WHERE id = %s", (self.rng.randint(1, 8),))

    def orphans(self, r):
        """Rows the replica holds whose parent it does not hold."""
        bad = 0
        for child, ccols, parent, pcols in FKS:
            cond = " AND ".join(f'p."{pc}" = c."{cc}"' for cc, pc in zip(ccols, pcols))
            notnull = " AND ".join(f'c."{cc}" IS NOT NULL' for cc in ccols)
            bad += r.one(f'SELECT count(*) FROM "{child}" c WHERE {notnull} AND NOT EXISTS (SELECT 1 FROM "{parent}" p WHERE {cond})')
        return bad

    def added_values(self, r, wanted):
        """Of the columns the walk added, the values the replica's rows have that are not the
        server's: [(table, column, key, replica's, server's)]."""
        wrong = []
        for t, col in self.added:
            keys = wanted.get(t, set())
            if not keys:
                continue
            kc = ", ".join(f'"{c}"' for c in KEYS[t])
            mine = dict(r.q(f'SELECT sync_key({kc}), "{col}" FROM "{t}"'))
            theirs = dict(self.srv.rows(f"SELECT sync.key(ARRAY[{', '.join(c + '::text' for c in KEYS[t])}]), {col}"
                                        f" FROM {t}"))
            for k in keys:
                if mine.get(k) != theirs.get(k):
                    wrong.append((t, col, k, mine.get(k), theirs.get(k)))
        return wrong

    def holds(self, r):
        """The replica's rows, by table: {table: set of canonical keys}."""
        has = {t: r.keys(t, KEYS[t]) for t in KEYS}
        return {t: k for t, k in has.items() if k}
