#!/usr/bin/python3
"""storm_inject.py - the storm's provisioning bound can fail: storm.py run
with STORM_INJECT=reprovision (every replica provisioned again every other
step of the storm's first half, sync.replica_reprovision, no new epoch) must
fail, on its per-replica bound for each replica and on nothing else: the old
count of epochs passes such a storm.

Run by tests/e2e/run (inside pg_virtualenv)."""
import os
import re
import subprocess
import sys

from harness import HERE, check, finish

env = dict(os.environ, STORM_INJECT="reprovision")
env.pop("SEGMENTS", None)
p = subprocess.run([sys.executable, os.path.join(HERE, "storm.py")], env=env, cwd=HERE,
                   capture_output=True, text=True, timeout=1800)
fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL ")]
for line in p.stdout.splitlines():
    if line.startswith(("snapshots per replica", "FAIL ", "steps:")) or re.match(r"^\d+ passed", line):
        # its own verdict, said so that tests/e2e/run does not take it for this script's
        print("   storm.py says:", line[:200].replace("Error", "error").replace(" failed", " failing"))
check("the storm with a reprovisioning storm injected fails", p.returncode, 1)
check("it died of nothing", "Traceback" in p.stdout + p.stderr, False)
bound = [f for f in fails if "provisionings were rare" in f and "provisioned once," in f]
check("on the per-replica bound, for each of the three replicas", len(bound), 3)
check("and on nothing else (the count of epochs stays 1)", len(fails), 3)
finish()
