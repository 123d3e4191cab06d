#!/usr/bin/python3
"""wishes.py - settings and wishes end to end (issue 18 item 1; docs/
protocol.md 5.4), with magic_sync_agent as a real process against a real
server and its SQLite file:

  - a setting table, one row per store, which the store writes: its row
    reaches the server, and each change of it (the latest wins, no version);
  - always: the server's wish is applied on the store, goes up as the
    store's own write, and the server's copy follows; sync.wishes says
    applied, sync_progress() on the store says the same;
  - if_unchanged applied while the store's row is as the server last filed it;
  - declined when the store changed its row first: it keeps its own, which
    reaches the server;
  - the store offline while two wishes are made: the older superseded, the
    newer applied;
  - a wish sent again (the message pulled again) is applied once.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "5e775e77-0000-4000-8000-000000000001"
tmp = tempfile.mkdtemp(prefix="wishes.")
path = os.path.join(tmp, "store.db")

srv = Server("wishes")
srv.exec("""
CREATE TABLE store_settings (store uuid PRIMARY KEY, printer text, seats int NOT NULL DEFAULT 0);
SELECT sync.mirror('store_settings', 'setting', 'assigned(store)', origin => 'store');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))


uploads = []


def agent():
    """magic_sync_agent --once: pull, apply, upload and file until nothing moves"""
    p = subprocess.run([AGENT, "--server", "dbname=wishes", "--replica", S1, "--db", path, "--once", "--json"],
                       capture_output=True, text=True, timeout=120)
    check(f"the agent settles ({p.stderr.strip()[-200:]})", p.returncode, 0)
    uploads.append(sum(e.get("uploads", 0) for e in map(json.loads, p.stdout.splitlines()) if e.get("event") == "round"))


def store(sql, args=()):
    r = Replica(srv, S1, path)
    try:
        return r.q(sql, args)
    finally:
        r.close()


def progress():
    r = Replica(srv, S1, path)
    try:
        return json.loads(r.one("SELECT sync_progress()")).get("store_settings", {})
    finally:
        r.close()


def wish(values, apply="always"):
    return srv.one("SELECT sync.wish('store_settings', %s, %s, %s)", (S1, json.dumps(values), apply))


def sent(*ids):
    """a relay pass (by hand: no worker relays in this database) sends these wishes, or they were superseded"""
    srv.relay()
    n = srv.one("SELECT count(*) FROM sync.wishes WHERE id = ANY(%s) AND (sent_in IS NOT NULL OR fate <> 'pending')",
                (list(ids),))
    return n == len(ids)


def fates():
    return {i: (f, w) for i, f, w in srv.rows("SELECT id, fate, why FROM sync.wishes")}


def server_row():
    return srv.rows("SELECT printer, seats FROM store_settings WHERE store = %s", (S1,))


def store_row():
    return store("SELECT printer, seats FROM store_settings")


srv.relay()                                    # a pass by hand: the snapshot is written
agent()
check("the store is provisioned, its setting table made", store("SELECT count(*) FROM store_settings"), [(0,)])

# --- the store writes its own row; each change reaches the server (latest wins) ---
store("INSERT INTO store_settings VALUES (?, 'hall', 4)", (S1,))
agent()
check("the store's row is filed", server_row(), [("hall", 4)])
store("UPDATE store_settings SET printer = 'desk'")
agent()
check("a change of it too, with no version: the latest wins", server_row(), [("desk", 4)])

# --- always ---------------------------------------------------------------------
w1 = wish({"printer": "office"})
check("a wish is pending", fates()[w1][0], "pending")
check("the relay sends it", sent(w1), True)
agent()
check("always: applied on the store", store_row(), [("office", 4)])
check("always: sync.wishes says applied", fates()[w1], ("applied", None))
check("the server's copy follows: the applied wish is the store's write", server_row(), [("office", 4)])
p = progress()
check("sync_progress() on the store says it", [(w["id"], w["fate"], w["answered"]) for w in p.get("wishes", [])],
      [(w1, "applied", True)])

# --- a wish sent again is applied once --------------------------------------------
number = srv.one("SELECT sent_in FROM sync.wishes WHERE id = %s", (w1,))
message = srv.one("SELECT o.head || b.bytes FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body"
                  " WHERE o.replica = %s AND o.number = %s", (S1, number))
store("UPDATE store_settings SET printer = 'mine'")
if message is not None:
    r = Replica(srv, S1, path)
    res = json.loads(r.one("SELECT sync_apply(?)", (bytes(message),)))
    r.close()
    check("the message again is a duplicate", res["result"], "duplicate")
agent()
check("applied once: the store's later change stands", (store_row(), server_row()), ([("mine", 4)], [("mine", 4)]))

# --- if_unchanged, unchanged: applied -----------------------------------------------
w2 = wish({"seats": 9}, "if_unchanged")
check("the relay sends it", sent(w2), True)
agent()
check("if_unchanged, the row as the server filed it: applied", (fates()[w2][0], store_row()), ("applied", [("mine", 9)]))
check("the server's copy follows", server_row(), [("mine", 9)])

# --- if_unchanged, the store changed its row first: declined ------------------------
store("UPDATE store_settings SET seats = 2")
w3 = wish({"seats": 12, "printer": "back"}, "if_unchanged")
check("the relay sends it", sent(w3), True)
agent()
f = fates()[w3]
check("declined: the store changed its row first", f[0], "declined")
check("it says why", "changed its row" in (f[1] or ""), True)
check("the store keeps its own, and its value reaches the server", (store_row(), server_row()),
      ([("mine", 2)], [("mine", 2)]))

# --- the store offline while two wishes are made: superseded, then applied ----------
w4 = wish({"printer": "first"})
check("the relay sends the first while the store is offline", sent(w4), True)
w5 = wish({"printer": "second"}, "if_unchanged")
check("the older is superseded on the server at once", fates()[w4][0], "superseded")
check("the relay sends the second", sent(w5), True)
agent()
check("the newer applied", (fates()[w5][0], store_row(), server_row()), ("applied", [("second", 2)], [("second", 2)]))
check("the older stays superseded", fates()[w4][0], "superseded")
p = {w["id"]: w["fate"] for w in progress().get("wishes", [])}
check("sync_progress() on the store says every fate", {i: p.get(i) for i in (w1, w2, w3, w5)},
      {w1: "applied", w2: "applied", w3: "declined", w5: "applied"})
check("the store had both when it decided: it says the older was superseded too", p.get(w4), "superseded")
check("every fate answered: the store has nothing more to say",
      all(w["answered"] for w in progress().get("wishes", []) if w["fate"] != "pending"), True)

# fates waiting for their answer make no upload alone: the agent filed the
# same fates a thousand times a pass while their answer was on its way
check("each agent run filed a few uploads, not one per pass of a thousand", max(uploads) <= 10, True)

# --- psql-friendly: what a user reads ------------------------------------------------
rows = srv.rows("SELECT replica::text, \"table\"::text, key, \"values\", apply, fate, why IS NOT NULL, made <= decided"
                " FROM sync.wishes ORDER BY id")
check("sync.wishes lists replica, table, key, values, apply, fate, why, when made and decided",
      [r[:6] for r in rows],
      [(S1, "store_settings", {"store": S1}, {"printer": "office"}, "always", "applied"),
       (S1, "store_settings", {"store": S1}, {"seats": 9}, "if_unchanged", "applied"),
       (S1, "store_settings", {"store": S1}, {"seats": 12, "printer": "back"}, "if_unchanged", "declined"),
       (S1, "store_settings", {"store": S1}, {"printer": "first"}, "always", "superseded"),
       (S1, "store_settings", {"store": S1}, {"printer": "second"}, "if_unchanged", "applied")])
finish()
