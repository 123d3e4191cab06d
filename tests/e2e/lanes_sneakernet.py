#!/usr/bin/python3
"""lanes_sneakernet.py - lanes through sneakernet bundles (issue 18 items 2
and 4, docs/protocol.md 7.2 and 11), with magic_sync_agent export/import as
real processes and a real SQLite replica:

  - a replica with rows in two lanes (the first: shelf counts; 'sales')
    writes one upload bundle (export --db): an upload of each lane, each
    carrying its own tables' rows, saying its lane, numbered in it;
  - the server files it (import --server): each lane's rows filed once,
    each upload answered in its own lane (sync.answers.lane), each lane's
    last number filed (sync.sends, sync.lanes) the one its upload carried;
  - the same bundle filed again is a duplicate in every lane: refused as
    applied already (exit 65), nothing filed twice (a trigger counts every
    write of the server's tables), no number moved, no answer queued;
  - the answers go back by the next bundle to the replica (export
    --server, import --db): each lane's notes let go of, the replica's
    numbers the server's lane by lane;
  - a later bundle with rows in lane sales only, and then one filed after it
    that is older (the first again): duplicates, nothing changed; and again
    once its answers are pruned, when only each lane's own numbers can say
    so (docs/protocol.md 7.1): a duplicate in every lane, answered in each.
  - a bundle's answers lost and pruned, the bundle filed again: each lane's
    duplicate answer makes that lane's rows go again, numbered beyond its
    last filed, filed once.

Run by tests/e2e/run (inside pg_virtualenv)."""
import hashlib
import json
import os
import subprocess
import tempfile

import upwire
from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "1a7e0000-0000-4000-8000-0000000000b1"
tmp = tempfile.mkdtemp(prefix="lanes_sneakernet.")
path = os.path.join(tmp, "van.db")
CONN = "dbname=lanes_sneakernet"

srv = Server("lanes_sneakernet")
srv.exec("""
CREATE TABLE counts (van uuid, id bigint, shelf int NOT NULL, PRIMARY KEY (van, id));
CREATE TABLE sales (van uuid, id bigint, amount int NOT NULL, v bigint NOT NULL, PRIMARY KEY (van, id));
SELECT sync.mirror('counts', 'record', origin => 'van');
SELECT sync.mirror('sales', 'record', origin => 'van', version => 'v', lane => 'sales');
CREATE TABLE writes (tbl text, op text, id bigint);
CREATE FUNCTION counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.writes VALUES (TG_TABLE_NAME, TG_OP, NEW.id); RETURN NULL; END $$;
CREATE TRIGGER counted AFTER INSERT OR UPDATE ON counts FOR EACH ROW EXECUTE FUNCTION counted();
CREATE TRIGGER counted AFTER INSERT OR UPDATE ON sales FOR EACH ROW EXECUTE FUNCTION counted();
ALTER TABLE counts ENABLE ALWAYS TRIGGER counted;
ALTER TABLE sales ENABLE ALWAYS TRIGGER counted;
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.relay()


KEY = srv.one("SELECT encode(sync.signing_key(), 'hex')")


def agent(*args):
    """magic_sync_agent with --json: its exit code and its one JSON object.  import --db pins the server's
    key (the van's file trusts none until an operator pins it); import --server, as the operator's role,
    names the van (docs/operations.md)"""
    args = list(args)
    if args[:2] == ["import", "--db"]:
        args += ["--server-key", KEY]
    if args[:2] == ["import", "--server"] and "--replica" not in args:
        args += ["--replica", S1]
    p = subprocess.run([AGENT] + args + ["--json"], capture_output=True, text=True, timeout=120)
    out = None
    for line in (p.stdout + p.stderr).splitlines():
        try:
            out = json.loads(line)
        except ValueError:
            pass
    if out is None:
        print(f"agent {args}: exit {p.returncode}, no JSON: {p.stdout!r} {p.stderr!r}", flush=True)
    return p.returncode, out or {}


def read_bundle(name):
    """docs/protocol.md 11: (kind, its messages), the check verified"""
    b = open(name, "rb").read()
    assert b[:8] == b"MSBUNDLE" and hashlib.sha256(b[:-32]).digest() == b[-32:]
    count, pos, msgs = int.from_bytes(b[28:32], "big"), 40, []
    for _ in range(count):
        n = int.from_bytes(b[pos:pos + 4], "big")
        msgs.append(b[pos + 4:pos + 4 + n])
        pos += 4 + n
    return b[10], msgs


def up_of(msg):
    """an Up's lane (16), seq (11), send id (3) and rows per table"""
    f = {}
    for n, v in upwire.fields(msg):
        f.setdefault(n, v)
    rows = {t: len(r["upserts"]) + len(r["deletes"]) for t, r in upwire.tables(msg).items()}
    return {"lane": bytes(f.get(16, b"")).decode(), "seq": f.get(11), "send_id": bytes(f[3]), "rows": rows}


def server_state():
    """what a duplicate must leave as it was"""
    return (srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s ORDER BY lane", (S1,)),
            srv.rows("SELECT lane, count(*) FROM sync.answers WHERE replica = %s GROUP BY lane ORDER BY lane", (S1,)),
            srv.one("SELECT count(*) FROM writes"),
            srv.rows("SELECT * FROM counts ORDER BY id"), srv.rows("SELECT * FROM sales ORDER BY id"))


def progress():
    r = Replica(srv, S1, path)
    p = json.loads(r.one("SELECT sync_progress()"))
    r.close()
    return {t: (p[t]["unsent"], p[t]["unfiled"], p[t]["set_aside"]) for t in ("counts", "sales")}


def replica_lanes():
    r = Replica(srv, S1, path)
    lanes = {lane["lane"]: lane["last_seq"] for lane in json.loads(r.one("SELECT sync_lanes()"))}
    r.close()
    return lanes


def trip_down(name, to=None):
    """the server's bundle for the van, exported and imported (its upload into to)"""
    b = os.path.join(tmp, name)
    rc, out = agent("export", "--server", CONN, "--replica", S1, "--to", b)
    check(f"{name}: exported", rc, 0)
    rc, out = agent("import", "--db", path, "--from", b, *(["--to", to] if to else []))
    check(f"{name}: imported on the van", (rc, out.get("result")), (0, "applied"))
    return out


# --- the van provisioned by files alone ---------------------------------------
u0 = os.path.join(tmp, "u0.bundle")
trip_down("b0.bundle", u0)
rc, out = agent("import", "--server", CONN, "--from", u0)
check("the van's first upload is filed", rc, 0)
srv.relay()                                 # a pass sees the snapshot acknowledged: the van is provisioned
check("the van is provisioned", srv.one("SELECT provision OR snapshot_end > acked_number FROM sync.replicas"
                                        " WHERE id = %s", (S1,)), False)
check("the van's lanes: the first, then sales", list(replica_lanes()), ["", "sales"])

# --- rows in two lanes: one bundle, an upload per lane --------------------------
r = Replica(srv, S1, path)
for i in range(1, 4):
    r.q("INSERT INTO counts VALUES (?, ?, ?)", (S1, i, i))
for i in range(1, 5):
    r.q("INSERT INTO sales VALUES (?, ?, ?, 1)", (S1, i, 10 * i))
r.close()
u1 = os.path.join(tmp, "u1.bundle")
rc, out = agent("export", "--db", path, "--replica", S1, "--to", u1)
check("the van's upload bundle is written", (rc, out.get("result")), (0, "written"))
kind, msgs = read_bundle(u1)
ups = [up_of(m) for m in msgs]
check("an upload bundle, an upload of each lane, the first first",
      (kind, [u["lane"] for u in ups]), (2, ["", "sales"]))
check("each lane's upload carries its own tables' rows", [u["rows"] for u in ups], [{"counts": 3}, {"sales": 4}])
mine = replica_lanes()
check("each numbered in its lane", {u["lane"]: u["seq"] for u in ups}, mine)
check("on numbers of their own", len({u["seq"] for u in ups}), 2)

# --- filed on the server: each lane's rows once, answered in its own lane --------
before = server_state()
rc, out = agent("import", "--server", CONN, "--from", u1)
check("the server files the bundle", (rc, out.get("result"), out.get("uploads"), out.get("duplicates")),
      (0, "filed", 2, 0))
check("every row of both lanes filed", (srv.one("SELECT count(*) FROM counts"), srv.one("SELECT count(*) FROM sales")),
      (3, 4))
check("each filed once", srv.rows("SELECT tbl, op, count(*) FROM writes GROUP BY tbl, op ORDER BY tbl, op"),
      [("counts", "INSERT", 3), ("sales", "INSERT", 4)])
check("each upload answered in its own lane",
      [srv.one("SELECT lane FROM sync.answers WHERE replica = %s AND send_id = %s", (S1, u["send_id"])) for u in ups],
      ["", "sales"])
check("each lane's last number filed is its upload's",
      srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s ORDER BY lane", (S1,)),
      [(u["lane"], u["seq"]) for u in ups])
check("sync.lanes: one answer more in each lane",
      {lane: n for lane, n in srv.rows("SELECT lane, answers FROM sync.lanes WHERE replica = %s", (S1,))},
      {"": dict(before[1])[""] + 1, "sales": dict(before[1]).get("sales", 0) + 1})
filed = server_state()

# --- the same bundle again: a duplicate in every lane -----------------------------
rc, out = agent("import", "--server", CONN, "--from", u1)
check("the same bundle again is applied already (exit 65)", (rc, out.get("result")), (65, "applied_already"))
check("every upload of it a duplicate", (out.get("uploads"), out.get("duplicates"), out.get("filed")), (2, 2, 0))
check("nothing filed twice, no number moved, no answer queued", server_state(), filed)

# --- the answers go back: each lane's notes let go of ------------------------------
check("before the answers come, both lanes' rows wait for them", progress(), {"counts": (0, 3, 0), "sales": (0, 4, 0)})
out = trip_down("b1.bundle")
check("the answers of both lanes applied (and the first upload's)", out.get("answers"), 3)
check("both lanes' rows let go of", progress(), {"counts": (0, 0, 0), "sales": (0, 0, 0)})
check("the van's numbers are the server's, lane by lane", replica_lanes(),
      dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s", (S1,))))

# --- rows in lane sales only; then the first bundle filed after it -----------------
r = Replica(srv, S1, path)
for i in range(5, 8):
    r.q("INSERT INTO sales VALUES (?, ?, ?, 1)", (S1, i, 10 * i))
r.q("UPDATE sales SET amount = 11, v = 2 WHERE id = 1")
r.close()
u2 = os.path.join(tmp, "u2.bundle")
rc, out = agent("export", "--db", path, "--replica", S1, "--to", u2)
kind, msgs = read_bundle(u2)
ups2 = [up_of(m) for m in msgs]
check("lane sales alone has rows: the first lane says what the van applied, without rows",
      [(u["lane"], u["rows"]) for u in ups2], [("", {}), ("sales", {"sales": 4})])
rc, out = agent("import", "--server", CONN, "--from", u2)
check("filed", (rc, out.get("result"), out.get("duplicates")), (0, "filed", 0))
check("the sales filed once each, the edit too",
      srv.rows("SELECT op, count(*) FROM writes WHERE tbl = 'sales' GROUP BY op ORDER BY op"),
      [("INSERT", 7), ("UPDATE", 1)])
check("lane sales' number moves on, the first lane's is the control's",
      dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s", (S1,))),
      {u["lane"]: u["seq"] for u in ups2})
later = server_state()
rc, out = agent("import", "--server", CONN, "--from", u1)
check("the older bundle filed after it: applied already, a duplicate in every lane",
      (rc, out.get("result"), out.get("duplicates")), (65, "applied_already", 2))
check("the edit stays, nothing changed", server_state(), later)
check("sale 1 as the van last wrote it", srv.one("SELECT amount FROM sales WHERE id = 1"), 11)
out = trip_down("b2.bundle")
check("its answers let go of the sales", progress(), {"counts": (0, 0, 0), "sales": (0, 0, 0)})

# --- the first bundle again once its answers are pruned: each lane's numbers say duplicate --
srv.exec("DELETE FROM sync.answers WHERE replica = %s AND send_id = ANY(%s)", (S1, [u["send_id"] for u in ups]))
pruned = server_state()
rc, out = agent("import", "--server", CONN, "--from", u1)
check("its answers pruned, the first bundle again: a duplicate in every lane by that lane's numbers",
      (rc, out.get("result"), out.get("duplicates"), out.get("filed")), (65, "applied_already", 2, 0))
check("nothing filed, no number moved", server_state()[:1] + server_state()[2:], pruned[:1] + pruned[2:])
check("its duplicate answers said in their own lanes",
      [srv.one("SELECT lane FROM sync.answers WHERE replica = %s AND send_id = %s", (S1, u["send_id"])) for u in ups],
      ["", "sales"])
out = trip_down("b3.bundle")
check("the van takes them and sends nothing again", (out.get("answers"), progress()),
      (2, {"counts": (0, 0, 0), "sales": (0, 0, 0)}))
check("and numbers each lane on from the server's last", replica_lanes(),
      dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s", (S1,))))

# --- answers lost on the way and pruned: the duplicates make each lane send again ----
r = Replica(srv, S1, path)
r.q("INSERT INTO counts VALUES (?, 40, 40)", (S1,))
r.q("INSERT INTO sales VALUES (?, 40, 400, 1)", (S1,))
r.close()
u4 = os.path.join(tmp, "u4.bundle")
rc, out = agent("export", "--db", path, "--replica", S1, "--to", u4)
ups4 = [up_of(m) for m in read_bundle(u4)[1]]
rc, out = agent("import", "--server", CONN, "--from", u4)
check("a bundle of both lanes filed", (rc, out.get("uploads"), out.get("duplicates")), (0, 2, 0))
srv.exec("DELETE FROM sync.answers WHERE replica = %s AND send_id = ANY(%s)", (S1, [u["send_id"] for u in ups4]))
rc, out = agent("import", "--server", CONN, "--from", u4)
check("filed again, its answers lost and pruned: a duplicate in each lane", (rc, out.get("duplicates")), (65, 2))
out = trip_down("b4.bundle")
check("the duplicates' answers make both lanes' rows go again", progress(), {"counts": (1, 0, 0), "sales": (1, 0, 0)})
u5 = os.path.join(tmp, "u5.bundle")
rc, out = agent("export", "--db", path, "--replica", S1, "--to", u5)
ups5 = [up_of(m) for m in read_bundle(u5)[1]]
check("each in its own lane, numbered beyond that lane's last filed",
      [(u["lane"], u["rows"], u["seq"] > dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s",
                                                         (S1,)))[u["lane"]]) for u in ups5],
      [("", {"counts": 1}, True), ("sales", {"sales": 1}, True)])
rc, out = agent("import", "--server", CONN, "--from", u5)
check("filed, no duplicate", (rc, out.get("result"), out.get("duplicates")), (0, "filed", 0))
trip_down("b5.bundle")
check("and let go of", progress(), {"counts": (0, 0, 0), "sales": (0, 0, 0)})
check("each row there once, as written",
      (srv.rows("SELECT id, shelf FROM counts WHERE id = 40"), srv.rows("SELECT id, amount, v FROM sales WHERE id = 40")),
      ([(40, 40)], [(40, 400, 1)]))
finish()
