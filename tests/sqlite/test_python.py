#!/usr/bin/python3
"""Load the replica extension from Python's standard sqlite3 module, as an
application would, and check the digest vectors.  Debian's /usr/bin/python3
is built with extension loading."""
import os
import sqlite3
import sys

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
print(f"{3 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
