#!/usr/bin/python3
"""The writer's statement in bench/hops.py's kept traces, cut at its system calls
(issue 37, hop "commit").  Not a test: prints figures.

bench/hops.py, run with MS_HOPS_KEEP=DIR, keeps perf trace's output and the
processes' roles.  For each UPDATE the writing backend received, mirrored (its
commit sets the relay worker's latch: kill(SIGURG)) or unmirrored, right after a
mirrored round ("after") or 200 ms after an unmirrored one ("alike"), p50 / p90 of:

  cpu      received .. its WAL pwrite begins (the statement, the trigger, the
           notes' insert at pre-commit)
  fsync    its WAL fdatasync
  post     the fdatasync's end .. the answer's sendto begins, less the kill
  kill     the kill(SIGURG) of the worker
  ->kill   the fdatasync's end .. the kill begins
  kill->   the kill's end .. the sendto begins (the writer preempted by the
           worker it woke shows here)
  round    received .. answered

  bench/trigger_trace.py DIR...
"""
import json
import re
import statistics
import sys

LINE = re.compile(r'^\s*([\d.]+) \(\s*([\d.]*)\s*(?:ms)?\s*\): (\S+)/(\d+)\s+'
                  r'(?:\.\.\. \[continued\]: )?(\w+)\((.*?)\)\s*(?:=\s*(-?\d+))?')


def writer_calls(d):
    """(start, end, call, result) of the writer's finished system calls, by their end"""
    procs = json.load(open(d + "/procs.json"))
    writer = next(p for p, role in procs.items() if role == "writer")
    out = []
    for line in open(d + "/trace.txt"):
        m = LINE.match(line)
        if not m or m.group(4) != writer:
            continue
        start, took, _, _, call, _, ret = m.groups()
        if "..." in line and "[continued]" not in line and ret is None:
            continue
        start = float(start)
        out.append((start, start + (float(took) if took else 0.0), call, int(ret) if ret else None))
    return sorted(out, key=lambda e: e[1])


def statements(calls):
    """each statement's calls, from the read of the request until the backend waits again"""
    out, cur = [], None
    for c in calls:
        if c[2] == "recvfrom" and (c[3] or 0) > 0:
            cur = [c]
            out.append(cur)
        elif c[2] == "epoll_wait":
            cur = None
        elif cur is not None:
            cur.append(c)
    return out


def cut(stmt):
    first = {}
    for c in stmt:
        first.setdefault(c[2], c)
    if not all(k in first for k in ("pwrite64", "fdatasync", "sendto")):
        return None
    got, pw, fs, sd, kill = stmt[0], first["pwrite64"], first["fdatasync"], first["sendto"], first.get("kill")
    row = {"cpu": pw[0] - got[1], "fsync": fs[1] - fs[0], "round": sd[1] - got[1],
           "post": sd[0] - fs[1] - ((kill[1] - kill[0]) if kill else 0.0)}
    if kill:
        row.update({"kill": kill[1] - kill[0], "->kill": kill[0] - fs[1], "kill->": sd[0] - kill[1]})
    return row


def main():
    kinds = {"mirrored": [], "after": [], "alike": []}
    for d in sys.argv[1:]:
        before = None
        for stmt in statements(writer_calls(d)):
            row = cut(stmt)
            if row is None:
                before = None
                continue
            kind = "mirrored" if "kill" in row else "after" if before == "mirrored" else "alike"
            kinds[kind].append(row)
            before = "mirrored" if kind == "mirrored" else "plain"
    keys = ["cpu", "fsync", "post", "kill", "->kill", "kill->", "round"]
    print(f"the writer's statement, ms (p50 / p90), {len(sys.argv) - 1} trace(s):")
    print("  %-9s %4s " % ("", "n") + " ".join("%13s" % k for k in keys))
    for kind, rows in kinds.items():
        if not rows:
            continue
        cells = []
        for k in keys:
            v = sorted(r[k] for r in rows if k in r)
            cells.append("%6.3f /%6.3f" % (statistics.median(v), v[int(0.9 * (len(v) - 1))]) if v else "%13s" % "-")
        print("  %-9s %4d " % (kind, len(rows)) + " ".join(cells))


if __name__ == "__main__":
    main()
