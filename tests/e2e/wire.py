"""wire.py - build Up messages by hand (docs/protocol.md 7), for uploads a
real replica would never send: another replica's records, a catalog's
columns, unknown tables and columns, forged acknowledgements.  Each is
numbered and checked as a replica's are (docs/protocol.md 7.1): its length
first, its SHA-256 last."""
import hashlib
import os
import struct
import time
import uuid as uuidlib


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def fixed64(num, value):
    return varint(num << 3 | 1) + struct.pack("<Q", value)


def key(parts):
    return b"".join(field(1, str(p)) for p in parts)


def rows(table, upserts=(), deletes=()):
    """upserts: [(key parts, row bytes)], deletes: [key parts]"""
    out = field(1, table)
    for parts, row in upserts:
        out += field(2, row if isinstance(row, bytes) else row.encode()) + field(3, key(parts))
    for parts in deletes:
        out += field(4, key(parts))
    return out


def applied(epoch, number, nonce, seal):
    return field(1, epoch) + field(2, number) + field(3, nonce) + field(4, seal)


def now_seq():
    """A send number as a replica draws one: the time in microseconds, when
    that is later than its last (docs/protocol.md 7.1)."""
    return time.time_ns() // 1000


def checked(body):
    """An upload's fields with its length first and its check last."""
    total = 9 + len(body) + 34
    head = fixed64(12, total) + body
    return head + field(13, hashlib.sha256(head).digest())


def up(replica, tables=(), ack=None, digests=(), gap=None, send_id=None, protocol=1, seq=None, check=True):
    """replica: uuid text; tables: [rows(...)]; digests: [(table, count, fnv)];
    seq: the send number (default: now); check=False leaves the check out."""
    out = field(1, protocol) + field(2, uuidlib.UUID(replica).bytes) + field(3, send_id or os.urandom(16))
    if ack is not None:
        out += field(4, ack)
    for t in tables:
        out += field(5, t)
    for table, count, fnv in digests:
        out += field(7, field(1, table) + field(2, count) + fixed64(3, fnv))
    if gap is not None:
        out += field(9, gap[0]) + field(10, gap[1])
    out += field(11, now_seq() if seq is None else seq)
    return checked(out) if check else out
