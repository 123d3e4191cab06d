#!/usr/bin/python3
"""device.py - a replica that reaches its server only through the app's
backend over HTTP(S) (backend.py): SQLite with magic_sync_sqlite loaded, and
urllib carrying the same bytes the agent carries over libpq.

    python3 device.py --url https://app.example:8443 --token TOKEN \\
        --extension /usr/lib/x86_64-linux-gnu/magic_sync_sqlite \\
        --db oslo.db --replica a1a1a1a1-0000-4000-8000-000000000001 [--cafile ca.pem]

A round pulls what waits for the replica after the last message it applied
(POST /sync/pull with its sync_applied()) and applies each message
(sync_apply), then files what the replica wrote and applied (sync_upload ->
POST /sync/file), until nothing moves.  The device never names its replica
to the backend: its token does.  A 503 is the server's infrastructure: tried
again at the next round, as the agent does; an upload refused for good (400)
has its rows set aside with the server's reason."""
import argparse
import json
import sqlite3
import ssl
import urllib.error
import urllib.request

STOP = ("gap", "later_protocol", "wrong_replica", "older_generation")


class Unavailable(Exception):
    """the backend or the server behind it cannot answer now: try again later"""


def open_replica(path, extension, replica):
    """the file, with magic_sync_sqlite loaded and the replica's uuid set"""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.enable_load_extension(True)
    db.load_extension(extension)
    db.enable_load_extension(False)
    db.execute("SELECT sync_init(?)", (replica,))
    return db


class Device:
    def __init__(self, db, url, token, cafile=None, timeout=60):
        self.db = db
        self.url = url.rstrip("/")
        self.token = token
        self.tls = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
        self.timeout = timeout
        self.unfiled = None     # an upload whose filing broke: the same bytes go again first

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=body, method="POST", headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.tls) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            if e.code == 503:
                raise Unavailable(e.read().decode(errors="replace")) from None
            raise
        except (urllib.error.URLError, OSError) as e:
            raise Unavailable(str(e)) from None

    def status(self):
        return json.loads(self.db.execute("SELECT sync_status()").fetchone()[0])

    def pull_apply(self, max_bytes=4 << 20):
        """every message waiting, applied in order: sync_apply's results"""
        applied = bytes(self.db.execute("SELECT sync_applied()").fetchone()[0])
        got = self.post(f"/sync/pull?after={self.status()['applied']}&max_bytes={max_bytes}", applied)
        results, pos = [], 0
        while pos < len(got):
            if pos + 4 > len(got):
                raise ValueError("a pull's answer cut short")
            n = int.from_bytes(got[pos:pos + 4], "big")
            message = got[pos + 4:pos + 4 + n]
            if len(message) != n:
                raise ValueError("a pull's answer cut short")
            pos += 4 + n
            r = json.loads(self.db.execute("SELECT sync_apply(?)", (message,)).fetchone()[0])
            results.append(r)
            if r["result"] in STOP:
                break
        return results

    def upload(self):
        """the next upload filed: sync.file's answer, or None when the replica has nothing to say.
        One whose filing broke on the way is sent again, the same bytes, before any other:
        the server files an upload once however often it comes, and the replica would
        otherwise wait resend_after for its rows (docs/operations.md, as the agent does)."""
        up = self.unfiled
        if up is None:
            up = self.db.execute("SELECT sync_upload()").fetchone()[0]
            if up is None:
                return None
            up = bytes(up)
        self.unfiled = up
        try:
            answer = json.loads(self.post("/sync/file", up))  # Unavailable keeps it
        except urllib.error.HTTPError as e:
            self.unfiled = None
            if e.code == 400:
                # refused for good (a row the server cannot file): its rows are set
                # aside with the server's reason, for sync_retry() after a fix.  The
                # agent narrows such an upload down to the rows at fault first.
                reason = e.read().decode(errors="replace")[:500]
                self.db.execute("SELECT sync_upload_refused(?, ?, 1)", (up, reason))
            raise
        self.unfiled = None
        return answer

    def round(self, rounds=4):
        """pull and apply, upload and file, until nothing moves; how many messages and uploads moved"""
        moved = 0
        for _ in range(rounds):
            applied = self.pull_apply()
            filed = self.upload()
            if not applied and filed is None:
                break
            moved += len(applied) + (filed is not None)
        return moved


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="a replica synced through an app's HTTP(S) backend")
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--extension", required=True, help="magic_sync_sqlite, as SQLite's load_extension finds it")
    ap.add_argument("--db", required=True)
    ap.add_argument("--replica", required=True)
    ap.add_argument("--cafile", help="the backend's certificate authority (PEM), when not the system's")
    a = ap.parse_args()
    d = Device(open_replica(a.db, a.extension, a.replica), a.url, a.token, a.cafile)
    try:
        moved = d.round()
    except Unavailable as e:
        print(f"{a.replica}: the backend is unavailable ({e}): try again later")
        raise SystemExit(69)
    print(f"{a.replica}: {moved} messages and uploads moved; applied up to {d.status()['applied']}")
