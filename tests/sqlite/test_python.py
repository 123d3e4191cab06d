#!/usr/bin/python3
"""Load the replica extension from Python's standard sqlite3 module, as an
application would: check the digest vectors, apply a snapshot from the fuzz
seeds (valid messages), read the rows, write one, upload, take the answer.
Debian's /usr/bin/python3 is built with extension loading."""
import json
import os
import sqlite3
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ext = os.path.join(here, "..", "..", "magic_sync_sqlite")

conn = sqlite3.connect(":memory:")
conn.enable_load_extension(True)
conn.load_extension(ext)
conn.enable_load_extension(False)

failed = 0
def check(name, got, expected):
    global failed
    if got != expected:
        failed += 1
        print(f"FAIL {name}: {got!r} != {expected!r}")

check("key", conn.execute("select sync_key(?, ?)", ("a", "bc")).fetchone()[0], "1:a2:bc")
conn.execute("create table k(v)")
conn.executemany("insert into k values (?)", [("10",), ("2",), ("1",)])
check("digest", conn.execute("select sync_digest_keys(sync_key(v)) from k").fetchone()[0],
      '{"count":3,"fnv":"20ea5df0c6c56817"}')
try:
    conn.execute("select sync_key()").fetchone()
    check("no parts refused", "no error", "error")
except sqlite3.OperationalError as e:
    check("no parts refused", "sync_key" in str(e), True)
checks = 3

seeds = os.path.join(here, "..", "fuzz", "seeds")
def seed(name):
    with open(os.path.join(seeds, name), "rb") as f:
        return f.read()

def run(name, got, expected):
    global checks
    checks += 1
    check(name, got, expected)

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "replica.db")
    db = sqlite3.connect(path)
    db.enable_load_extension(True)
    db.load_extension(ext)
    db.enable_load_extension(False)

    def apply(blob):
        (out,) = db.execute("select sync_apply(?)", (blob,)).fetchone()
        db.commit()
        return json.loads(out)

    run("snapshot begins", apply(seed("00_snapshot.bin"))["snapshot"], "begin")
    run("snapshot ends", apply(seed("01_end.bin"))["snapshot"], "end")
    run("rows", db.execute("select id, name from products order by id").fetchall(),
        [(1, "tea"), (2, "coffee"), (3, "cake")])
    status = json.loads(db.execute("select sync_status()").fetchone()[0])
    run("replica learnt", status["replica"], "10111213-1415-4617-1819-1a1b1c1d1e1f")
    run("a str is not a message", "error", "error")
    try:
        db.execute("select sync_apply(?)", ("not bytes",)).fetchone()
        check("a str is not a message", "no error", "error")
    except sqlite3.Error as e:
        check("a str is not a message (says why)", "must be a BLOB" in str(e), True)

    # the application writes, in a transaction of its own
    with db:
        db.execute("insert into orders values (?, 1, 1, 12.5, 'from python')", (status["replica"],))
    progress = json.loads(db.execute("select sync_progress()").fetchone()[0])
    run("noted", progress["orders"]["unsent"], 1)
    up = db.execute("select sync_upload()").fetchone()[0]
    db.commit()
    run("upload is bytes", type(up), bytes)
    run("the row is in it", b"from python" in up, True)
    progress = json.loads(db.execute("select sync_progress()").fetchone()[0])
    run("sent, not filed", (progress["orders"]["unsent"], progress["orders"]["unfiled"]), (0, 1))
    run("nothing more to say", db.execute("select sync_upload()").fetchone()[0], None)
    run("digest", json.loads(db.execute("select sync_digest()").fetchone()[0])["products"]["count"], 3)
    run("next message applies", apply(seed("02_down_json.bin"))["result"], "applied")
    db.close()

    # another connection, with no extension: its writes are noted all the same
    other = sqlite3.connect(path)
    with other:
        other.execute("update orders set total = 13 where id = 1 and origin = ?", (status["replica"],))
    other.close()
    db = sqlite3.connect(path)
    db.enable_load_extension(True)
    db.load_extension(ext)
    progress = json.loads(db.execute("select sync_progress()").fetchone()[0])
    run("written elsewhere, noted", progress["orders"]["unsent"], 1)
    db.close()

print(f"{checks - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
