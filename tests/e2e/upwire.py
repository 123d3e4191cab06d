"""upwire.py - what an upload carries, read as a transport in the middle
could read it (docs/protocol.md 7: an Up is protobuf; a row's bytes are its
JSON): the storm's transport refuses for good the uploads carrying a row it
cannot take, and counts the rows of each as the agent does (rows_in)."""
import json


def _varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(buf):
    """(field number, value) of a protobuf message, in order: int or bytes."""
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        kind = tag & 7
        if kind == 0:
            value, i = _varint(buf, i)
        elif kind == 1:
            value, i = buf[i:i + 8], i + 8
        elif kind == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif kind == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {kind} at byte {i}")
        yield tag >> 3, value


def key_parts(key):
    return [bytes(v).decode() for n, v in fields(key) if n == 1]


def tables(up):
    """{table: {"upserts": [(key parts, row as a dict)], "deletes": [key parts]}} of an Up"""
    out = {}
    for n, rows in fields(up):
        if n != 5:
            continue
        name, upserts, keys, deletes = None, [], [], []
        for m, v in fields(rows):
            if m == 1:
                name = bytes(v).decode()
            elif m == 2:
                upserts.append(json.loads(bytes(v)))
            elif m == 3:
                keys.append(key_parts(v))
            elif m == 4:
                deletes.append(key_parts(v))
        t = out.setdefault(name, {"upserts": [], "deletes": []})
        t["upserts"] += list(zip(keys, upserts))
        t["deletes"] += deletes
    return out


def rows_in(up):
    """The rows (upserts and deletes) an upload carries, as the agent counts them."""
    return sum(len(t["upserts"]) + len(t["deletes"]) for t in tables(up).values())
