#!/usr/bin/python3
"""evolve.py - schema changes end to end (issue 16, docs/design.md 4.11): each
DDL on the server reaches real SQLite replicas -- two through the SQLite
extension, one through magic_sync_agent as a real process -- as a schema
change in the chain with only the rows it needs, while the replicas and the
server keep writing around it (a store writes its own column while the
server adds another, a sale is written in the old schema and filed in the
new).  After every migration, every replica holds exactly its wanted set,
values included, what the engine records equals it, and nobody was
provisioned again but where a change cannot be carried.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile

from harness import Replica, Server, check, finish, TOP

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "eeeeeeee-0000-4000-8000-000000000001"
S2 = "eeeeeeee-0000-4000-8000-000000000002"
S3 = "eeeeeeee-0000-4000-8000-000000000003"
tmp = tempfile.mkdtemp()

srv = Server("evolve")
srv.exec("""
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price int NOT NULL, maker int);
CREATE TABLE makers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE stock (store uuid, product int REFERENCES products, qty int NOT NULL, counted int,
                    PRIMARY KEY (store, product));
CREATE TABLE sales (store uuid, id int, product int NOT NULL REFERENCES products, total int NOT NULL,
                    v int NOT NULL, PRIMARY KEY (store, id));
CREATE INDEX ON stock (product);
CREATE INDEX ON sales (product);
SELECT sync.mirror('makers', 'catalog');
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v');
INSERT INTO makers VALUES (1, 'acme'), (2, 'globex');
INSERT INTO products SELECT g, 'p' || g, 10 * g, 1 + g % 2 FROM generate_series(1, 40) g;
""")
for s in (S1, S2, S3):
    srv.exec("SELECT sync.replica_add(%s)", (s,))
    srv.exec("INSERT INTO stock SELECT %s, g, g FROM generate_series(1, 10) g", (s,))
r1 = Replica(srv, S1, os.path.join(tmp, "r1.db"))
r2 = Replica(srv, S2, os.path.join(tmp, "r2.db"))
r3_path = os.path.join(tmp, "r3.db")
agent_events = []


def agent():
    """The third store: its agent runs until nothing more moves (--once)."""
    env = dict(os.environ)
    out = subprocess.run([AGENT, "--once", "--json", "--server", f"dbname={srv.db}", "--replica", S3,
                          "--db", r3_path, "--interval", "200"], capture_output=True, text=True, env=env)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    agent_events.extend(lines)
    if out.returncode != 0:
        print(f"FAIL the agent exited with {out.returncode}: {out.stdout[-2000:]} {out.stderr[-2000:]}")
    return lines


r3 = None


def r3_open():
    global r3
    if r3 is None:
        r3 = Replica(srv, S3, r3_path)
    return r3


def settle(passes=8):
    """Relay and sync every replica until nothing moves; the passes' figures summed."""
    total = {"rows_sent": 0, "rows_taken": 0, "provisioned": 0, "messages": 0}
    for _ in range(passes):
        did = srv.relay()
        for k in total:
            total[k] += did[k]
        moved = did["messages"] > 0 or did["provisioned"] > 0
        for r in (r1, r2):
            for applied, filed in r.sync():
                moved |= bool(applied) or (filed is not None and filed.get("filed", 0) > 0)
        if r3 is not None:
            r3.close()
        moved |= any(e.get("event") == "round" for e in agent())
        if r3 is not None:
            r3.open()
        if not moved and srv.one("SELECT count(*) FROM sync.notes WHERE NOT done") == 0:
            break
    return total


def server_rows(table, cols, where=""):
    return sorted(tuple(int(v) if isinstance(v, bool) else v for v in row)
                  for row in srv.rows(f"SELECT {', '.join(cols)} FROM {table} {where}"))


def replica_rows(r, table, cols):
    q = ", ".join(f'"{c}"' for c in cols)
    return sorted(tuple(row) for row in r.q(f'SELECT {q} FROM "{table}"'))


def agrees(step):
    """Every replica: what the engine records it holds is its wanted set, and so is its file, values included."""
    for r in (r1, r2, r3_open()):
        wanted = srv.wanted(r.id)
        check(f"{step}: {r.id[-1]} held is its wanted set", srv.held(r.id), wanted)
        for t, key in (("products", ["id"]), ("goods", ["id"]), ("makers", ["id"]), ("stock", ["store", "product"]),
                       ("sales", ["store", "id"])):
            if t in srv.wanted(r.id) or r.keys(t, key):
                check(f"{step}: {r.id[-1]} {t} in its file is its wanted set", r.keys(t, key), wanted.get(t, set()))
        pcols = [c for (c,) in srv.rows("SELECT c FROM jsonb_object_keys((SELECT columns FROM sync.tables"
                                        " WHERE name IN ('products', 'goods'))) c ORDER BY 1")]
        table = srv.one("SELECT name FROM sync.tables WHERE name IN ('products', 'goods')")
        check(f"{step}: {r.id[-1]} {table} values", replica_rows(r, table, pcols),
              server_rows(table, pcols, "WHERE id IN (SELECT (sync.key_parts(w.key))[1]::int FROM sync.wanted(%s) w"
                          " WHERE w.tab = '%s'::regclass)" % (f"'{r.id}'", table)))
        scols = ["store", "product", "qty", "counted"]
        check(f"{step}: {r.id[-1]} stock values", replica_rows(r, "stock", scols),
              [tuple(x) for x in server_rows("stock", ["store::text"] + scols[1:], f"WHERE store = '{r.id}'")])


snapshots = None


def no_snapshot(step):
    check(f"{step}: nobody was provisioned again",
          dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas")), snapshots)


# ---- the fleet, provisioned ------------------------------------------------------
settle()
r3_open()
snapshots = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
agrees("provisioned")

# ---- ADD COLUMN with a default, while a store writes its own column ----------------
r1.q("UPDATE stock SET counted = 41 WHERE product = 1")
early = r1.one("SELECT sync_upload()")             # written in the old schema, filed late
srv.exec("ALTER TABLE stock ADD COLUMN shelf text NOT NULL DEFAULT 'A'")
srv.exec("ALTER TABLE products ADD COLUMN tax int NOT NULL DEFAULT 7")
did = srv.relay()
check("ADD COLUMN DEFAULT: the pass sends no row", did["rows_sent"], 0)
check("ADD COLUMN DEFAULT: one message per replica", did["messages"], 3)
answer = srv.file(S1, bytes(early))
check("the upload written in the old schema is not filed", answer["filed"], 0)
check("its row is still the server's", srv.one("SELECT counted FROM stock WHERE store = %s AND product = 1", (S1,)), None)
srv.exec("UPDATE products SET tax = 9 WHERE id = 3")
settle()
check("the store's write goes up again in the new schema and is filed",
      srv.one("SELECT counted FROM stock WHERE store = %s AND product = 1", (S1,)), 41)
check("every store took the fill", [r.one("SELECT count(*) FROM products WHERE tax = 7") for r in (r1, r2, r3)],
      [39, 39, 39])
check("and the one row changed since", [r.one("SELECT tax FROM products WHERE id = 3") for r in (r1, r2, r3)], [9, 9, 9])
check("the shelf is every stock row's", [r.one("SELECT count(*) FROM stock WHERE shelf = 'A'") for r in (r1, r2, r3)],
      [10, 10, 10])
schema = [e for e in agent_events if e.get("event") == "schema"]
check("the agent says the schema changed", len(schema) > 0 and schema[-1]["failed"] == [], True)
agrees("ADD COLUMN DEFAULT")
no_snapshot("ADD COLUMN DEFAULT")

# ---- a sale written in the old schema of its table ---------------------------------
r2.q("INSERT INTO sales VALUES (?, 1, 5, 50, 1)", (S2,))
early = r2.one("SELECT sync_upload()")
srv.exec("ALTER TABLE sales ADD COLUMN channel text NOT NULL DEFAULT 'till'")
srv.relay()
check("a sale written in the old schema is not filed", srv.file(S2, bytes(early))["filed"], 0)
settle()
check("it is filed once the store has the new schema, with the column's default",
      srv.rows("SELECT total, channel FROM sales WHERE store = %s AND id = 1", (S2,)), [(50, "till")])
agrees("a sale across a change")

# ---- RENAME COLUMN, with a store's own view over it: the relay never stops ----------
r2.q("CREATE VIEW cheap AS SELECT id, name FROM products WHERE price < 100")
srv.exec("ALTER TABLE products RENAME COLUMN name TO title")
check("sync.check says nothing", srv.rows("SELECT * FROM sync.check()"), [])
did = settle()
check("RENAME COLUMN sends no row", did["rows_sent"], 0)
check("the store's view follows it", r2.one("SELECT count(*) FROM cheap WHERE title LIKE 'p%'"), 9)
srv.exec("UPDATE products SET title = 'renamed' WHERE id = 1")
settle()
check("a change after it arrives", [r.one("SELECT title FROM products WHERE id = 1") for r in (r1, r2, r3)],
      ["renamed"] * 3)
agrees("RENAME COLUMN")

# ---- DROP COLUMN a store's own index uses: said, the rest applied -------------------
r3.q("CREATE INDEX mine ON products (maker)")
r3.close()
r3 = None
before = len(agent_events)
srv.exec("ALTER TABLE products DROP COLUMN maker")
did = settle()
check("DROP COLUMN sends no row", did["rows_sent"], 0)
failed = [f for e in agent_events[before:] if e.get("event") == "schema" for f in e["failed"]]
check("the agent prints the statement that failed", [(f["table"], "DROP COLUMN" in f["statement"], f["rest_applied"])
                                                     for f in failed], [("products", True, True)])
r3_open()
check("the column stays in that store's file, the others dropped it",
      [r.one("SELECT count(*) FROM pragma_table_info('products') WHERE name = 'maker'") for r in (r1, r2, r3)],
      [0, 0, 1])
check("its last error says so", "DROP COLUMN" in (r3.status()["last_error"] or ""), True)
agrees("DROP COLUMN")

# ---- ALTER COLUMN TYPE: the table's rows again, that table only --------------------
did = None
srv.exec("ALTER TABLE products ALTER COLUMN price TYPE bigint")
did = settle()
check("ALTER COLUMN TYPE sends the table's rows again", did["rows_sent"], 3 * 40)
agrees("ALTER COLUMN TYPE")

# ---- ADD COLUMN without a default, a generated column --------------------------------
srv.exec("ALTER TABLE products ADD COLUMN note text")
did = settle()
check("ADD COLUMN without a default sends no row", did["rows_sent"], 0)
check("every store has it, NULL", [r.one("SELECT count(*) FROM products WHERE note IS NULL") for r in (r1, r2, r3)],
      [40, 40, 40])
srv.exec("ALTER TABLE products ADD COLUMN twice bigint GENERATED ALWAYS AS (price * 2) STORED")
did = settle()
check("a generated column sends the table's rows again, that table only", (did["rows_sent"], did["provisioned"]),
      (3 * 40, 0))
check("with the server's values", [r.one("SELECT sum(twice) FROM products") for r in (r1, r2, r3)],
      [srv.one("SELECT sum(twice) FROM products")] * 3)
agrees("ADD COLUMN without a default, generated")

# ---- SET / DROP NOT NULL, a unique index that travels -------------------------------
srv.exec("ALTER TABLE products ALTER COLUMN tax DROP NOT NULL")
srv.exec("ALTER TABLE products ALTER COLUMN note SET DEFAULT ''")
srv.exec("UPDATE products SET note = ''")
did = settle()
srv.exec("ALTER TABLE products ALTER COLUMN note SET NOT NULL")
did = settle()
check("SET NOT NULL sends no row", (did["rows_sent"], did["provisioned"]), (0, 0))
srv.exec("UPDATE products SET tax = NULL WHERE id = 4")
settle()
check("a NULL where NOT NULL was dropped arrives", [r.one("SELECT tax IS NULL FROM products WHERE id = 4")
                                                    for r in (r1, r2, r3)], [1, 1, 1])
srv.exec("CREATE UNIQUE INDEX products_title ON products (title)")
did = settle()
check("a unique index sends no row", (did["rows_sent"], did["provisioned"]), (0, 0))
check("every store has it, unique",
      [r.one("SELECT count(*) FROM pragma_index_list('products') l"
             " WHERE l.\"unique\" AND EXISTS (SELECT 1 FROM pragma_index_info(l.name) i WHERE i.name = 'title')"
             "   AND l.origin = 'c'") for r in (r1, r2, r3)], [1, 1, 1])
# two titles swapped: the upsert of one makes room in the index for the other
with srv.conn.cursor() as c:
    c.execute("BEGIN")
    c.execute("UPDATE products SET title = 'swap' WHERE id = 2")
    c.execute("UPDATE products SET title = 'p2' WHERE id = 3")
    c.execute("UPDATE products SET title = 'p3' WHERE id = 2")
    c.execute("COMMIT")
settle()
check("titles swapped under the unique index", [r.q("SELECT id, title FROM products WHERE id IN (2, 3) ORDER BY id")
                                                for r in (r1, r2, r3)], [[(2, "p3"), (3, "p2")]] * 3)
srv.exec("DROP INDEX products_title")
did = settle()
check("the unique index dropped: no row", (did["rows_sent"], did["provisioned"]), (0, 0))
check("and gone from every store",
      [r.one("SELECT count(*) FROM pragma_index_list('products') l WHERE l.\"unique\" AND l.origin = 'c'")
       for r in (r1, r2, r3)], [0, 0, 0])
agrees("NOT NULL, a unique index")

# ---- a column added, then given to the stores, while the server adds another --------
srv.exec("ALTER TABLE stock ADD COLUMN remark text")
srv.exec("SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted,remark}')")
settle()
r2.q("UPDATE stock SET remark = 'dented' WHERE product = 3")
srv.exec("ALTER TABLE stock ADD COLUMN bin int NOT NULL DEFAULT 4")
settle()
check("the store's own new column is filed across the server's",
      srv.rows("SELECT remark, bin FROM stock WHERE store = %s AND product = 3", (S2,)), [("dented", 4)])
check("every store has the server's", [r.one("SELECT sum(bin) FROM stock") for r in (r1, r2, r3)], [40, 40, 40])
agrees("a replica-owned column added")
no_snapshot("ADD, NOT NULL, unique, replica-owned")

# ---- a foreign key added: parents follow; dropped: they go -----------------------
srv.exec("ALTER TABLE products ADD COLUMN made_by int REFERENCES makers")
srv.exec("UPDATE products SET made_by = 1 + id % 2")
settle()
check("makers follow the products that point at them",
      [r.keys("makers", ["id"]) for r in (r1, r2, r3)], [{"1:1", "1:2"}] * 3)
agrees("FOREIGN KEY added")
srv.exec("ALTER TABLE products DROP CONSTRAINT products_made_by_fkey")
settle()
check("and go once nothing points at them", [r.keys("makers", ["id"]) for r in (r1, r2, r3)], [set()] * 3)
agrees("FOREIGN KEY dropped")

# ---- a new mirrored table: its schema and its rows, nothing else --------------------
srv.exec("CREATE TABLE notices (id int PRIMARY KEY, body text NOT NULL)")
srv.exec("INSERT INTO notices VALUES (1, 'open'), (2, 'closed')")
srv.exec("SELECT sync.mirror('notices', 'catalog', 'broadcast')")
did = settle()
check("a new table: its rows only", did["rows_sent"], 6)
check("every store has it", [r.one("SELECT count(*) FROM notices") for r in (r1, r2, r3)], [2, 2, 2])
# declared again with an active view, its rows planned again; then unmirrored
srv.exec("CREATE VIEW open_notices AS SELECT * FROM notices WHERE body = 'open'")
srv.exec("SELECT sync.mirror('notices', 'catalog', 'broadcast', active => 'open_notices')")
did = settle()
check("declared again: the rows outside its view are taken back, none sent", (did["rows_sent"], did["rows_taken"]),
      (0, 3))
check("each store keeps the open one", [r.one("SELECT count(*) FROM notices") for r in (r1, r2, r3)], [1, 1, 1])
srv.exec("SELECT sync.unmirror('notices')")
settle()
check("unmirrored: the stores let it go, rows then table",
      [r.one("SELECT count(*) FROM sqlite_master WHERE name = 'notices'") for r in (r1, r2, r3)], [0, 0, 0])
agrees("a table declared, again, and unmirrored")

# ---- RENAME TO ----------------------------------------------------------------------
srv.exec("ALTER TABLE products RENAME TO goods")
settle()
check("the stores know it by its new name",
      [r.one("SELECT count(*) FROM goods") for r in (r1, r2, r3)], [40, 40, 40])
r1.q("UPDATE stock SET counted = 5 WHERE product = 2")
settle()
check("a store's write after it is filed", srv.one("SELECT counted FROM stock WHERE store = %s AND product = 2", (S1,)), 5)
agrees("RENAME TO")
no_snapshot("every migration so far")
check("the digests agree: nobody provisioned by a digest",
      srv.rows("SELECT id::text, last_error FROM sync.replicas WHERE last_error IS NOT NULL"), [])

# ---- what cannot be carried: only the replicas holding the table ------------------
srv.exec("CREATE TABLE tasks (id int PRIMARY KEY, store uuid NOT NULL, what text)")
srv.exec("SELECT sync.mirror('tasks', 'catalog', 'assigned(store)')")
srv.exec("INSERT INTO tasks VALUES (1, %s, 'count')", (S1,))
settle()
snapshots = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
srv.exec("SET client_min_messages = notice")
del srv.conn.notices[:]
srv.exec("ALTER TABLE tasks ALTER COLUMN id TYPE bigint")
srv.exec("SET client_min_messages = error")
check("a NOTICE at the DDL says it provisions the replicas holding it",
      any("cannot carry" in n and "tasks" in n for n in srv.conn.notices), True)
check("sync.health says which", [(k, r) for k, r in srv.rows("SELECT kind, replica::text FROM sync.health()"
                                                              " WHERE kind = 'provisioning'")], [("provisioning", S1)])
settle()
after = dict(srv.rows("SELECT id::text, snapshot_number FROM sync.replicas"))
check("a key's type changed: only the store holding its rows was provisioned again",
      sorted(k for k in after if after[k] != snapshots[k]), [S1])
agrees("a key changed")
finish()
