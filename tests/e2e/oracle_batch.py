#!/usr/bin/python3
"""oracle_batch.py - oracle.py with passes that read 3 notes
(magic_sync.batch_notes) and close the batch over the rows they touch:
changes wait beyond it while replicas hold their rows' older versions, and
no replica is ever left holding a row without the rows it points at.

    tests/e2e/run oracle_batch.py      (SEED=n STEPS=n BATCH=n to vary)
"""
import os
import runpy

os.environ.setdefault("BATCH", "3")
os.environ.setdefault("STEPS", "80")
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle.py"), run_name="__main__")
