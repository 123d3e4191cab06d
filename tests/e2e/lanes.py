#!/usr/bin/python3
"""lanes.py - lanes (issue 18.2, docs/protocol.md 7.2) with the real agent
and a real SQLite replica:

  - a table declared in a lane of its own (sales, lane => 'till') is told to
    the replica in its snapshot, and the replica uploads it apart;
  - a till writing sales 1,000 times a second (a writer thread committing
    one small transaction each, paced) while another table's rare writes
    (a shelf count every second) still reach the server within one agent
    round of being written.  A round gives each lane a turn (the agent's
    passes do not settle while the till writes, so its round lines cannot
    time it): measured as the till's uploads the server filed between a
    count's write and its filing (sync.answers.filed, the count's created
    stamp), at most 1, the one under way when it was written;
  - per-lane send numbers and answers, visible on the server: sync.sends and
    sync.lanes per (replica, lane), sync.answers.lane;
  - a lost answer on one lane does not block the other: while the till's
    answers are lost (a trigger drops them), the shelf counts are filed and
    let go of on the replica, the sales still reach the server, and only the
    till's notes wait;
  - moving a table to another lane is a schema change that travels: the
    replica follows it without a snapshot.

Run by tests/e2e/run (inside pg_virtualenv)."""
import json
import os
import subprocess
import tempfile
import threading
import time

from harness import TOP, Replica, Server, check, finish

AGENT = os.path.join(TOP, "magic_sync_agent")
S1 = "1a7e0000-0000-4000-8000-000000000001"
tmp = tempfile.mkdtemp(prefix="lanes.")
path = os.path.join(tmp, "till.db")
RATE = 1000                 # sales a second
SECONDS = 12                # how long the till writes
RARE_EVERY = 1.0            # a shelf count every second

srv = Server("lanes")
srv.exec("""
CREATE TABLE sales (till uuid, id bigint, amount int NOT NULL, filed timestamptz, PRIMARY KEY (till, id));
CREATE TABLE counts (till uuid, id bigint, shelf int NOT NULL, filed timestamptz, PRIMARY KEY (till, id));
SELECT sync.mirror('sales', 'record', origin => 'till', created => 'filed', lane => 'till');
SELECT sync.mirror('counts', 'record', origin => 'till', created => 'filed');
""")
srv.exec("SELECT sync.replica_add(%s)", (S1,))
srv.relay()


def agent_once():
    p = subprocess.run([AGENT, "--server", "dbname=lanes", "--replica", S1, "--db", path, "--once", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


rc, said = agent_once()
check("the agent provisions the till", rc, 0)
r = Replica(srv, S1, path)
lanes = json.loads(r.one("SELECT sync_lanes()"))
check("the snapshot tells the replica its lanes",
      [(lane["lane"], lane["tables"]) for lane in lanes], [("", ["counts"]), ("till", ["sales"])])
r.close()


class Agent:
    """magic_sync_agent running, its --json round events timed as they come"""

    def __init__(self):
        self.p = subprocess.Popen([AGENT, "--server", "dbname=lanes", "--replica", S1, "--db", path,
                                   "--json", "--interval", "1000"], stdout=subprocess.PIPE, text=True)
        self.rounds = []        # (time the line came, the event)
        self.events = []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.p.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            self.events.append(e.get("event"))
            if e.get("event") == "round":
                self.rounds.append((time.time(), e))

    def stop(self):
        self.p.terminate()
        code = self.p.wait(timeout=60)
        self.reader.join(timeout=10)
        return code


def writer(stop, counts, rare):
    """the till: RATE small transactions a second; a rare shelf count every RARE_EVERY"""
    w = Replica(srv, S1, path)
    w.q("PRAGMA busy_timeout = 10000")
    w.q("PRAGMA synchronous = NORMAL")
    start = time.time()
    n = 0
    next_rare = start + RARE_EVERY / 2
    while not stop.is_set():
        now = time.time()
        if now >= next_rare:
            rid = len(rare) + 1
            w.q("INSERT INTO counts VALUES (?, ?, ?, NULL)", (S1, rid, rid))
            rare.append((rid, time.time()))
            next_rare += RARE_EVERY
        due = int((now - start) * RATE)
        while n < due and not stop.is_set():
            n += 1
            w.q("INSERT INTO sales VALUES (?, ?, ?, NULL)", (S1, n, n % 97))
        time.sleep(0.001)
    counts.append(n)
    counts.append(time.time() - start)
    w.close()


def server_now():
    return srv.one("SELECT extract(epoch FROM clock_timestamp())::float8")


# the server's clock against ours (one machine: a few ms at most), so that a filed stamp compares with a write
offset = server_now() - time.time()

ag = Agent()
time.sleep(2)
stop = threading.Event()
wrote = []
rare = []
t = threading.Thread(target=writer, args=(stop, wrote, rare))
t.start()
time.sleep(SECONDS)
stop.set()
t.join()
written, took = wrote
print(f"the till wrote {written} sales in {took:.1f} s ({written / took:.0f} a second), "
      f"and {len(rare)} shelf counts", flush=True)
check("the till wrote about 1,000 sales a second", written / took >= 0.9 * RATE, True)

# every shelf count filed: how many rounds ended between its write and its filing
deadline = time.time() + 60
while time.time() < deadline and srv.one("SELECT count(*) FROM counts") < len(rare):
    time.sleep(0.2)
filed = dict(srv.rows("SELECT id, extract(epoch FROM filed)::float8 FROM counts"))
check("every shelf count reached the server", len(filed), len(rare))
# a round gives each lane its turn: between a rare write and its filing, the
# busy lane takes at most one (its upload under way when the count was
# written); counted from the server's answers, each stamped when filed
tills = [t for (t,) in srv.rows("SELECT extract(epoch FROM filed)::float8 FROM sync.answers"
                                " WHERE replica = %s AND lane = 'till' ORDER BY filed", (S1,))]
between = []
latency = []
for rid, at in rare:
    f = filed.get(rid)
    if f is None:
        continue
    latency.append(f - offset - at)
    between.append(sum(1 for t in tills if at + offset < t < f))
if latency:
    print(f"shelf counts: filed {min(latency) * 1000:.0f} to {max(latency) * 1000:.0f} ms after written"
          f" (median {sorted(latency)[len(latency) // 2] * 1000:.0f} ms); the till's uploads filed meanwhile:"
          f" at most {max(between)} ({len(tills)} till uploads in all)", flush=True)
check("each shelf count was filed within one agent round of being written (one till upload at most between)",
      max(between or [99]) <= 1, True)

# the till's sales all arrive too
deadline = time.time() + 120
while time.time() < deadline and srv.one("SELECT count(*) FROM sales") < written:
    time.sleep(0.5)
check("every sale reached the server", srv.one("SELECT count(*) FROM sales"), written)

# per-lane numbers and answers on the server
lanes = srv.rows("SELECT lane, last_seq > 0, answers > 0, tables FROM sync.lanes WHERE replica = %s ORDER BY lane",
                 (S1,))
check("sync.lanes: each lane of the till with its send numbers and answers",
      lanes, [("", True, True, ["counts"]), ("till", True, True, ["sales"])])
# the agent still runs: an upload it has just sent (an acknowledgement, say) is
# numbered on the replica before the server files it, so the two agree once it is filed
r = Replica(srv, S1, path)
deadline = time.time() + 30
while True:
    seqs = dict(srv.rows("SELECT lane, filed_seq FROM sync.sends WHERE replica = %s", (S1,)))
    mine = {lane["lane"]: lane["last_seq"] for lane in json.loads(r.one("SELECT sync_lanes()"))}
    if mine == seqs or time.time() > deadline:
        break
    time.sleep(0.2)
r.close()
check("the replica's last numbers are the server's last filed, lane by lane", mine, seqs)
check("each lane numbers on its own", len(set(seqs.values())), 2)
check("answers of each lane queued, said in sync.answers.lane",
      srv.one("SELECT count(DISTINCT lane) FROM sync.answers WHERE replica = %s", (S1,)), 2)

# --- a lost answer on one lane does not block the other ----------------------
srv.exec("""
CREATE FUNCTION lose() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER lose BEFORE INSERT ON sync.answers FOR EACH ROW WHEN (NEW.lane = 'till') EXECUTE FUNCTION lose();
""")
w = Replica(srv, S1, path)
w.q("PRAGMA busy_timeout = 10000")
before = srv.one("SELECT count(*) FROM counts")
for i in range(1, 6):
    w.q("INSERT INTO sales VALUES (?, ?, 1, NULL)", (S1, written + i))
    w.q("INSERT INTO counts VALUES (?, ?, 1, NULL)", (S1, 1000 + i))
    time.sleep(0.3)


def progress(table):
    return json.loads(w.one("SELECT sync_progress()")).get(table, {})


deadline = time.time() + 30
while time.time() < deadline and (srv.one("SELECT count(*) FROM counts") < before + 5 or progress("counts").get("unfiled", 1)
                                  or srv.one("SELECT count(*) FROM sales") < written + 5):
    time.sleep(0.2)
check("while the till's answers are lost, the shelf counts are filed", srv.one("SELECT count(*) FROM counts"), before + 5)
check("and let go of on the replica (their answers came)",
      (progress("counts").get("unsent"), progress("counts").get("unfiled")), (0, 0))
check("the till's sales still reach the server", srv.one("SELECT count(*) FROM sales"), written + 5)
check("only the till's rows wait for their answers", progress("sales").get("unfiled"), 5)
srv.exec("DROP TRIGGER lose ON sync.answers")
w.close()

# --- a table moved to another lane: a schema change that travels -------------
provisioned = srv.one("SELECT count(*) FROM sync.replicas WHERE provision")
srv.exec("SELECT sync.mirror('counts', 'record', origin => 'till', created => 'filed', lane => 'till')")
deadline = time.time() + 120
moved = None
while time.time() < deadline:
    r = Replica(srv, S1, path)
    moved = [(lane["lane"], lane["tables"]) for lane in json.loads(r.one("SELECT sync_lanes()"))]
    r.close()
    if moved == [("", []), ("till", ["sales", "counts"])] or moved == [("", []), ("till", ["counts", "sales"])]:
        break
    srv.relay()
    time.sleep(0.5)
r = Replica(srv, S1, path)
r.close()
check("the replica follows the move: both tables in lane till, the first lane has none",
      sorted(moved[1][1]) if moved and len(moved) == 2 else moved, ["counts", "sales"])
check("without being provisioned", srv.one("SELECT count(*) FROM sync.replicas WHERE provision"), provisioned)
w = Replica(srv, S1, path)
w.q("INSERT INTO counts VALUES (?, 5000, 1, NULL)", (S1,))
w.close()
deadline = time.time() + 30
while time.time() < deadline and srv.one("SELECT count(*) FROM counts WHERE id = 5000") == 0:
    time.sleep(0.2)
check("a count written after the move goes up in lane till", srv.one("SELECT count(*) FROM counts WHERE id = 5000"), 1)
check("the agent stops cleanly", ag.stop(), 0)
finish()
