#!/usr/bin/python3
"""guide.py - docs/guide.md runs as written: every ```sql block, in order, in
a database of its own (psql, ON_ERROR_STOP, as the superuser the guide's
reader is), and where a block is followed by a ``` block of output, psql
prints exactly that.  A block fenced ```sql-error must fail, with the error
its following output block shows (its ERROR line); NOTICE lines an output
block shows are what the block notices.  Run by tests/e2e/run
(inside pg_virtualenv)."""
import os
import re
import subprocess

from harness import TOP, check, finish, psql

GUIDE = os.path.join(TOP, "docs", "guide.md")
DB = "zbugs"

text = open(GUIDE).read()
# ```sql (or ```sql-error) blocks, each with the plain ``` block right after it, if any
fence = re.compile(r"^```(sql|sql-error)\n(.*?)^```\n(?:\n?^```\n(.*?)^```\n)?", re.S | re.M)
blocks = fence.findall(text)
check("the guide has SQL to run", len(blocks) > 10, True)

psql("postgres", f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}")
def said(stderr, level):
    """the lines of a level psql printed, without its psql:<stdin>:N: prefix"""
    out = []
    for line in stderr.splitlines():
        line = re.sub(r"^psql:<stdin>:\d+: ", "", line)
        if line.startswith(level + ":"):
            out.append(line)
    return out


for n, (kind, sql, shown) in enumerate(blocks, 1):
    first = sql.strip().splitlines()[0][:70]
    p = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", DB, "-f", "-"],
                       input=sql, capture_output=True, text=True)
    shown_lines = [line.rstrip() for line in (shown or "").strip("\n").splitlines()]
    if kind == "sql-error":
        check(f"block {n} ({first}) fails as shown", (p.returncode != 0, said(p.stderr, "ERROR")),
              (True, [line for line in shown_lines if line.startswith("ERROR:")]))
        continue
    check(f"block {n} ({first}) runs", (p.returncode, said(p.stderr, "ERROR")), (0, []))
    if shown:
        notices = [line for line in shown_lines if line.startswith("NOTICE:")]
        rest = [line for line in shown_lines if not line.startswith("NOTICE:")]
        out = [line.rstrip() for line in p.stdout.strip("\n").splitlines()]
        if notices:
            check(f"block {n} ({first}) notices what the guide shows", said(p.stderr, "NOTICE"), notices)
        if rest:
            if out != rest:
                print(f"block {n}: psql printed\n{p.stdout}")
            check(f"block {n} ({first}) prints what the guide shows", out, rest)
finish()
