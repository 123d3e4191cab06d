#!/usr/bin/python3
"""lanes_narrowing.py - an upload refused for good in a lane other than the
first is narrowed down there (issue 18 item 2 with issue 19 item 7,
docs/protocol.md 7 "Narrowing down" and 7.2), with magic_sync_agent as a
real process and a real SQLite replica:

  - three lanes: the first ('', shelf counts), 'sales' and 'returns'; the
    server's upload_bytes is 4 kB and lane sales carries one sale of 6,000
    bytes among ten small ones: the agent halves lane sales' upload until
    that sale is alone, sets it aside (counted in the backlog, with the
    server's reason), and files the nine others;
  - the first lane and lane returns flow all the same: every count and
    return filed, each lane's uploads answered in its own lane, their send
    numbers on the server (sync.sends, sync.lanes) the replica's own, and
    nothing of theirs set aside;
  - lane sales' numbers are its own: the refused sends are numbered in it
    only, the server's last filed of it is at or below the replica's;
  - once the bound is raised the sale set aside is filed, in lane sales;
  - a lone sale too large, nothing else in its lane: the lane's control
    (sync_upload(0, 'sales')) is taken, so the sale is set aside;
  - a server that takes nothing of lane sales (its control refused too):
    nothing set aside, the agent fails (--once: 70), and the first lane and
    lane returns are filed all the same, also when they come after it.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "1a7e0000-0000-4000-8000-0000000000a1"
tmp = tempfile.mkdtemp(prefix="lanes_narrowing.")
path = os.path.join(tmp, "till.db")

srv = Server("lanes_narrowing")
srv.exec("""
CREATE TABLE counts (till uuid, id bigint, shelf int NOT NULL, PRIMARY KEY (till, id));
CREATE TABLE sales (till uuid, id bigint, note text NOT NULL, PRIMARY KEY (till, id));
CREATE TABLE returns (till uuid, id bigint, sale bigint NOT NULL, PRIMARY KEY (till, id));
SELECT sync.mirror('counts', 'record', origin => 'till');
SELECT sync.mirror('sales', 'record', origin => 'till', lane => 'sales');
SELECT sync.mirror('returns', 'record', origin => 'till', lane => 'returns');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.relay()


def agent():
    """magic_sync_agent --once --json: its exit code and its events"""
    p = subprocess.run([AGENT, "--server", "dbname=lanes_narrowing", "--replica", S1, "--db", path, "--once",
                        "--json"], capture_output=True, text=True, timeout=300)
    events = []
    for line in p.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            check(f"the agent's line is JSON: {line!r}", False, True)
    if p.returncode not in (0, 70):
        print(f"agent: exit {p.returncode}: {p.stderr}", flush=True)
    return p.returncode, events


def rounds(events, field):
    return sum(e.get(field, 0) for e in events if e["event"] == "round")


def replica_lanes():
    r = Replica(srv, S1, path)
    lanes = {lane["lane"]: lane["last_seq"] for lane in json.loads(r.one("SELECT sync_lanes()"))}
    r.close()
    return lanes


def server_lanes():
    """per lane: (last number filed, answers kept)"""
    return {lane: (seq, answers) for lane, seq, answers in
            srv.rows("SELECT lane, last_seq, answers FROM sync.lanes WHERE replica = %s", (S1,))}


def progress():
    r = Replica(srv, S1, path)
    p = json.loads(r.one("SELECT sync_progress()"))
    r.close()
    return p


rc, events = agent()
check("the agent provisions the till", (rc, rounds(events, "snapshots")), (0, 1))
check("the till's lanes: the first, returns, sales", sorted(replica_lanes()), ["", "returns", "sales"])

# one of each, filed under no bound: every lane has a number and an answer on the server
r = Replica(srv, S1, path)
r.q("INSERT INTO counts VALUES (?, 0, 0)", (S1,))
r.q("INSERT INTO sales VALUES (?, 0, 'before')", (S1,))
r.q("INSERT INTO returns VALUES (?, 0, 0)", (S1,))
r.close()
rc, events = agent()
check("a first row of each lane is filed", (rc, [srv.one(f"SELECT count(*) FROM {t}") for t in
                                                 ("counts", "sales", "returns")]), (0, [1, 1, 1]))
before = server_lanes()
check("each lane numbered and answered on the server", sorted(before), ["", "returns", "sales"])

# --- lane sales: a sale too large for the server among ten small ones ----------
srv.exec("ALTER DATABASE lanes_narrowing SET magic_sync.upload_bytes = '4kB'")
r = Replica(srv, S1, path)
for i in range(1, 11):
    r.q("INSERT INTO sales VALUES (?, ?, ?)", (S1, i, "x" * 6000 if i == 7 else f"sale {i}"))
for i in range(1, 6):
    r.q("INSERT INTO counts VALUES (?, ?, ?)", (S1, i, i))
    r.q("INSERT INTO returns VALUES (?, ?, ?)", (S1, i, i))
r.close()
answered = {lane: n for lane, n in srv.rows("SELECT lane, count(*) FROM sync.answers WHERE replica = %s"
                                            " GROUP BY lane", (S1,))}
rc, events = agent()
check("the agent settles although the server refuses lane sales' upload", rc, 0)
check("it narrowed down and set one row aside", (rounds(events, "narrowed") > 0, rounds(events, "blamed")), (True, 1))
check("every sale that fits is filed", srv.one("SELECT count(*) FROM sales WHERE id BETWEEN 1 AND 10"), 9)
check("the one that never can is not", srv.one("SELECT count(*) FROM sales WHERE id = 7"), 0)
check("the first lane's counts are filed", srv.one("SELECT count(*) FROM counts"), 6)
check("lane returns' returns are filed", srv.one("SELECT count(*) FROM returns"), 6)
p = progress()
check("the sale is set aside alone, counted in the backlog",
      {t: (p[t]["set_aside"], p[t]["unsent"], p[t]["unfiled"]) for t in ("counts", "sales", "returns")},
      {"counts": (0, 0, 0), "sales": (1, 0, 0), "returns": (0, 0, 0)})
r = Replica(srv, S1, path)
why = r.one("SELECT set_aside FROM _sync_notes WHERE tbl = 'sales' AND set_aside IS NOT NULL")
aside = r.one("SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL")
r.close()
check("with the server's reason", "too large" in (why or "") and "upload_bytes" in (why or ""), True)
check("nothing else is set aside", aside, 1)
check("the server hears of it in the first lane's backlog",
      srv.one("SELECT backlog -> 'sales' ->> 'set_aside' FROM sync.replicas WHERE id = %s", (S1,)), "1")

after = server_lanes()
mine = replica_lanes()
check("the first lane and lane returns: the server's last numbers filed are the replica's",
      {lane: after[lane][0] for lane in ("", "returns")}, {lane: mine[lane] for lane in ("", "returns")})
check("each of them moved on", all(after[lane][0] > before[lane][0] for lane in ("", "returns")), True)
check("lane sales moved on too, its refused sends numbered in it only",
      (after["sales"][0] > before["sales"][0], mine["sales"] >= after["sales"][0]), (True, True))
now = {lane: n for lane, n in srv.rows("SELECT lane, count(*) FROM sync.answers WHERE replica = %s"
                                       " GROUP BY lane", (S1,))}
check("lane returns: one upload, one answer, in its lane", now["returns"] - answered["returns"], 1)
check("the first lane answered in its own lane", now[""] > answered[""], True)
check("lane sales: answers for what it filed only, in its lane (the halves that fit)",
      now["sales"] - answered["sales"] >= 1, True)
check("no answer in a lane the till has none of", sorted(now), ["", "returns", "sales"])
seqs = srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s ORDER BY lane", (S1,))
check("sync.sends: one row per lane", [lane for lane, _ in seqs], ["", "returns", "sales"])
check("sync.lanes says the same", [(lane, after[lane][0]) for lane in ("", "returns", "sales")], seqs)

# --- the other lanes go on while lane sales keeps its row aside -----------------
r = Replica(srv, S1, path)
r.q("INSERT INTO counts VALUES (?, 6, 6)", (S1,))
r.q("INSERT INTO returns VALUES (?, 6, 6)", (S1,))
r.close()
rc, events = agent()
check("an agent that starts again tries the sale again and sets it aside again",
      (rc, rounds(events, "blamed")), (0, 1))
check("the other lanes' rows written meanwhile are filed",
      (srv.one("SELECT count(*) FROM counts"), srv.one("SELECT count(*) FROM returns")), (7, 7))
mine = replica_lanes()
check("and their numbers are the server's still",
      {lane: seq for lane, seq in srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s AND lane <> 'sales'",
                                           (S1,))}, {lane: mine[lane] for lane in ("", "returns")})

# --- the bound raised: the sale is filed, in lane sales -------------------------
srv.exec("ALTER DATABASE lanes_narrowing RESET magic_sync.upload_bytes")
sales_answers = srv.one("SELECT count(*) FROM sync.answers WHERE replica = %s AND lane = 'sales'", (S1,))
rc, events = agent()
check("once the bound is raised, the sale is filed", (rc, srv.one("SELECT count(*) FROM sales WHERE id = 7")), (0, 1))
check("in lane sales, answered there",
      srv.one("SELECT count(*) FROM sync.answers WHERE replica = %s AND lane = 'sales'", (S1,)) > sales_answers, True)
p = progress()
check("nothing is set aside, nothing waits",
      {t: (p[t]["set_aside"], p[t]["unsent"], p[t]["unfiled"]) for t in ("counts", "sales", "returns")},
      {t: (0, 0, 0) for t in ("counts", "sales", "returns")})
mine = replica_lanes()
check("every lane's last number filed is the replica's",
      dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s", (S1,))), mine)

# --- a lone sale too large: the lane's control (sync_upload(0, 'sales')) decides ---
srv.exec("ALTER DATABASE lanes_narrowing SET magic_sync.upload_bytes = '4kB'")
r = Replica(srv, S1, path)
r.q("INSERT INTO sales VALUES (?, 20, ?)", (S1, "z" * 6000))
r.q("INSERT INTO counts VALUES (?, 20, 20)", (S1,))
r.close()
rc, events = agent()
check("a lone sale too large, nothing else in its lane: taken the lane's control, it is set aside",
      (rc, rounds(events, "blamed"), progress()["sales"]["set_aside"]), (0, 1, 1))
check("the count written beside it is filed", srv.one("SELECT count(*) FROM counts WHERE id = 20"), 1)
srv.exec("ALTER DATABASE lanes_narrowing RESET magic_sync.upload_bytes")
rc, events = agent()
check("filed once the bound is raised", (rc, srv.one("SELECT count(*) FROM sales WHERE id = 20")), (0, 1))

# --- a server that refuses every upload of lane sales: the other lanes go on -------
srv.exec("""
CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'lane sales is broken'; END $$;
CREATE TRIGGER broken BEFORE INSERT ON sync.answers FOR EACH ROW WHEN (NEW.lane = 'sales')
  EXECUTE FUNCTION broken();
""")
r = Replica(srv, S1, path)
for i in range(30, 33):
    r.q("INSERT INTO sales VALUES (?, ?, 'while broken')", (S1, i))
    r.q("INSERT INTO counts VALUES (?, ?, ?)", (S1, i, i))
    r.q("INSERT INTO returns VALUES (?, ?, ?)", (S1, i, i))
r.close()
rc, events = agent()
check("lane sales refused whole, its control too: the agent fails (--once: 70)", rc, 70)
check("nothing of lane sales is set aside, nothing filed",
      (progress()["sales"]["set_aside"], srv.one("SELECT count(*) FROM sales WHERE id >= 30")), (0, 0))
check("the first lane's counts and lane returns' returns are filed all the same",
      (srv.one("SELECT count(*) FROM counts WHERE id >= 30"), srv.one("SELECT count(*) FROM returns WHERE id >= 30")),
      (3, 3))
srv.exec("DROP TRIGGER broken ON sync.answers")
rc, events = agent()
check("once it is fixed, lane sales is filed", (rc, srv.one("SELECT count(*) FROM sales WHERE id >= 30")), (0, 3))
p = progress()
check("and nothing waits in any lane",
      {t: (p[t]["set_aside"], p[t]["unsent"], p[t]["unfiled"]) for t in ("counts", "sales", "returns")},
      {t: (0, 0, 0) for t in ("counts", "sales", "returns")})
finish()
