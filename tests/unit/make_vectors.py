#!/usr/bin/python3
"""Derive the test vectors of docs/protocol.md independently of the C code.

Python's stdlib only: canonical keys, FNV-1a 64, HMAC-SHA256, Ed25519 (RFC
8032's reference, section 6, over hashlib's SHA-512) and a hand-rolled
protobuf encoder.  Prints the C table of tests/unit/vectors.c;
the same values are written out in docs/protocol.md.
"""
import hashlib, hmac

def canonical(parts):
    out = b""
    for p in parts:
        b = p.encode("utf-8")
        out += str(len(b)).encode() + b":" + b
    return out

def digest(keys):
    h = 0xcbf29ce484222325
    ks = sorted(canonical(k) for k in keys)
    for k in ks:
        for byte in k + b"\n":
            h ^= byte
            h = (h * 0x100000001b3) & 0xffffffffffffffff
    return len(ks), h

M64 = 0xffffffffffffffff

def fnv(h, data):
    for byte in data:
        h ^= byte
        h = (h * 0x100000001b3) & M64
    return h

def fmix64(h):
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & M64
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & M64
    return h ^ (h >> 33)

ROW_MULT = 0x9e3779b97f4a7c15

def absorb(h, w):
    """One 64-bit word into a row's hash: rotated left 31, multiplied."""
    h ^= w
    h = ((h << 31) | (h >> 33)) & M64
    return (h * ROW_MULT) & M64

def absorb_bytes(h, b):
    """Bytes as little-endian words, the last padded with zero bytes."""
    for i in range(0, len(b), 8):
        h = absorb(h, int.from_bytes(b[i:i + 8], "little"))
    return h

def row_hash(key, values):
    """A row's contribution to a values digest (docs/protocol.md 8)."""
    import struct
    k = canonical(key)
    h = absorb_bytes(absorb(0xcbf29ce484222325, len(k)), k)
    for v in values:
        if v is None:
            h = absorb(h, 0)
        elif isinstance(v, bool):
            raise ValueError("no booleans in SQLite")
        elif isinstance(v, int):
            h = absorb(absorb(h, 1), v & M64)
        elif isinstance(v, float):
            bits = struct.unpack("<Q", struct.pack("<d", 0.0 if v == 0 else v))[0]
            h = absorb(absorb(h, 2), bits)
        elif isinstance(v, str):
            b = v.encode("utf-8")
            h = absorb_bytes(absorb(h, 3 | len(b) << 8), b)
        else:
            h = absorb_bytes(absorb(h, 4 | len(v) << 8), bytes(v))
    return fmix64(h)

# Values digests: table (id INTEGER key, name TEXT, price REAL, photo BLOB, note TEXT)
ROWS = [
    (["7"], [7, "tea, green", 2.5, b"\x01\x02", None]),
    (["-3"], [-3, "\u00e9", -0.0, b"", "n"]),
]

def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(num, wt, payload):
    if wt == 0:
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload

DIGESTS = [
    ("empty", []),
    ("ints", [["10"], ["2"], ["1"]]),
    ("composite", [["a", "bc"], ["ab", "c"], ["", "x"]]),
    ("uuid", [["7c9e6679-7425-40de-944b-e07fc1f90ae7"], ["0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1"]]),
    ("utf8", [["é"], ["e"], ["ε"], ["é", "1"]]),
    ("typed", [["2024-01-02T03:04:05.5+00:00", "1.5"], ["2023-12-31T23:30:00+00:00", "0.0012"],
               ["infinity", "-Infinity"]]),
]

# How each kind of key part is spelled (docs/protocol.md 3), derived here with
# decimal and datetime: what a part is written as, and its one spelling (None:
# refused).  BC years and the infinities are beyond datetime: spelled by hand.
SPELLINGS = [
    ("numeric", "1.50"), ("numeric", " +00012.3400 "), ("numeric", "-0.0"), ("numeric", ".5"),
    ("numeric", "1.5e3"), ("numeric", "1.5E-2"), ("numeric", "0.00120"), ("numeric", "nan"),
    ("numeric", "-inf"), ("numeric", "1e1001"), ("numeric", "12a"),
    ("date", "2024-01-02"), ("date", "2024-1-2"), ("date", "0044-03-15 BC"), ("date", "Infinity"),
    ("date", "2023-02-29"), ("date", "01/02/2024"),
    ("time", "3:04"), ("time", "03:04:05.120"), ("time", "24:00"),
    ("timestamp", "2024-01-02 03:04:05.5"), ("timestamp", "2024-01-02T03:04:05Z"),
    ("timestamp", "0044-03-15 03:00 BC"), ("timestamp", "2024-01-02 03:04:05.1234567"),
    ("timestamp", "2024-01-02 03:04:05.0000005"),
    ("timestamptz", "2024-01-02 04:04:05.5+01"), ("timestamptz", "2024-01-01 00:30:00+01:00"),
    ("timestamptz", "2024-01-02T03:04:05Z"), ("timestamptz", "2024-01-02 03:04:05"),
    ("timestamptz", "2024-01-02 03:04:05-0330"), ("timestamptz", "-infinity"),
    ("timestamptz", "2024-01-02 03:04:05+16"),
]

BY_HAND = {("date", "0044-03-15 BC"): "0044-03-15 BC", ("date", "Infinity"): "infinity",
           ("timestamp", "0044-03-15 03:00 BC"): "0044-03-15T03:00:00 BC",
           ("timestamptz", "-infinity"): "-infinity", ("numeric", "nan"): "NaN", ("numeric", "-inf"): "-Infinity",
           # a numeric's exponent beyond 1000; a fraction halfway between two microseconds; an offset beyond 15:59
           ("numeric", "1e1001"): None, ("timestamp", "2024-01-02 03:04:05.0000005"): None,
           ("timestamptz", "2024-01-02 03:04:05+16"): None}

def spelled(kind, written):
    import datetime, decimal, re
    if (kind, written) in BY_HAND:
        return BY_HAND[(kind, written)]
    try:
        if kind == "numeric":
            d = decimal.Decimal(written.strip())
            if d == 0:
                return "0"
            t = format(d.normalize(), "f")
            return t
        def fraction(t):
            # microseconds, rounded (never halfway here)
            m = re.search(r"\.(\d+)", t)
            if not m:
                return t, 0
            us = round(decimal.Decimal("0." + m.group(1)) * 1000000)
            return t[:m.start()] + t[m.end():], int(us)
        def seconds(us, t):
            return t + ("." + ("%06d" % us).rstrip("0") if us else "")
        if kind == "date":
            return datetime.datetime.strptime(written, "%Y-%m-%d").date().isoformat()
        if kind == "time":
            t, us = fraction(written)
            h, m, *sec = t.split(":")
            if int(h) == 24:
                return "24:00:00"
            return seconds(us, datetime.time(int(h), int(m), int(sec[0]) if sec else 0).isoformat())
        t, us = fraction(written.replace("T", " "))
        m = re.fullmatch(r"(\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?)(Z|[+-]\d\d(?::?\d\d)?)?", t)
        local = datetime.datetime.fromisoformat(m.group(1))
        if kind == "timestamp":
            return seconds(us, local.isoformat())
        off = m.group(2) or "+00"
        off = "+00:00" if off == "Z" else off
        sign = -1 if off[0] == "-" else 1
        digits = off[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0)) * sign
        utc = local - offset
        return seconds(us, utc.isoformat()) + "+00:00"
    except (ValueError, decimal.InvalidOperation, AttributeError):
        return None

SECRET = bytes(range(32))
REPLICA = bytes(range(0x10, 0x20))
EPOCH = bytes(range(0x20, 0x30))
NONCE = bytes(range(0x30, 0x40))
NUMBER = 42

def seal(secret, replica, epoch, number, nonce):
    msg = replica + epoch + number.to_bytes(8, "big") + nonce
    return msg, hmac.new(secret, msg, hashlib.sha256).digest()

def sample():
    """A Down of one row of table "products" and one delete, message 42 after 41."""
    prev_nonce = bytes(range(0x40, 0x50))
    _, s = seal(SECRET, REPLICA, EPOCH, NUMBER, NONCE)
    head = (field(1, 0, 1) + field(2, 2, EPOCH) + field(3, 0, NUMBER) + field(4, 2, NONCE)
            + field(5, 0, 41) + field(6, 2, prev_nonce) + field(7, 2, s) + field(8, 2, REPLICA))
    rows = (field(1, 2, b"products")
            + field(2, 2, b'{"id":7,"name":"tea"}')
            + field(3, 2, field(1, 2, b"7"))
            + field(4, 2, field(1, 2, b"8")))
    down = field(2, 2, rows)
    body = field(9, 2, down)
    return head, body

def evolve_sample():
    """Message 43 after the sample 42: a schema change of table "products" (its
    column "name" renamed "title", a column "price" added, which every row
    it holds takes as 0) and, after it, the upsert of row 9 in the new schema."""
    nonce = bytes(range(0x50, 0x60))
    _, s = seal(SECRET, REPLICA, EPOCH, 43, nonce)
    head = (field(1, 0, 1) + field(2, 2, EPOCH) + field(3, 0, 43) + field(4, 2, nonce)
            + field(5, 0, NUMBER) + field(6, 2, NONCE) + field(7, 2, s) + field(8, 2, REPLICA))
    def column(name, typ, server_type, cid, not_null=False):
        return field(4, 2, field(1, 2, name) + field(2, 2, typ) + (field(3, 0, 1) if not_null else b"")
                     + field(6, 2, server_type) + field(7, 0, cid))
    table = (field(1, 2, b"products") + field(2, 2, b"catalog") + field(3, 2, b"json")
             + column(b"id", b"INTEGER", b"integer", 1, True) + column(b"title", b"TEXT", b"text", 2)
             + column(b"price", b"INTEGER", b"integer", 3)
             + field(5, 2, b"id") + field(10, 0, 1) + field(12, 2, b'{"price":0}'))
    rows = (field(1, 2, b"products")
            + field(2, 2, b'{"id":9,"title":"rye","price":4}')
            + field(3, 2, field(1, 2, b"9")))
    down = field(2, 2, rows) + field(3, 2, table)
    return head, field(9, 2, down), nonce, s

GENERATION = 757382400000000   # 2024-01-01 00:00 UTC, in microseconds since 2000

def generation_head():
    """The sample's head, written in generation GENERATION (field 12)."""
    head, _ = sample()
    return head + field(12, 0, GENERATION)

def applied():
    """What a replica that applied the sample says of it (sync_applied(), Up.applied)."""
    _, s = seal(SECRET, REPLICA, EPOCH, NUMBER, NONCE)
    return (field(1, 2, EPOCH) + field(2, 0, NUMBER) + field(3, 2, NONCE) + field(4, 2, s)
            + field(5, 0, GENERATION))
SEND_ID = bytes(range(0x50, 0x60))
SEQ = 1700000000000000

def sample_up():
    """An Up of one row of table "orders", send 1700000000000000, with its length first and its check last."""
    rows = field(1, 2, b"orders") + field(2, 2, b'{"id":7}') + field(3, 2, field(1, 2, b"7"))
    body = (field(1, 0, 1) + field(2, 2, REPLICA) + field(3, 2, SEND_ID) + field(5, 2, rows)
            + field(11, 0, SEQ))
    total = 9 + len(body) + 34
    head = varint(12 << 3 | 1) + total.to_bytes(8, "little") + body
    return head + field(13, 2, hashlib.sha256(head).digest())

def wish_sample():
    """Message 43 after the sample 42, of one wish (docs/protocol.md 5.4): wish 5
    for the replica's row of setting table "settings", if_unchanged."""
    nonce = bytes(range(0x60, 0x70))
    _, s = seal(SECRET, REPLICA, EPOCH, 43, nonce)
    head = (field(1, 0, 1) + field(2, 2, EPOCH) + field(3, 0, 43) + field(4, 2, nonce)
            + field(5, 0, NUMBER) + field(6, 2, NONCE) + field(7, 2, s) + field(8, 2, REPLICA))
    wish = (field(1, 0, 5) + field(2, 2, b"settings")
            + field(3, 2, field(1, 2, b"10111213-1415-1617-1819-1a1b1c1d1e1f"))
            + field(4, 2, b'{"printer":"hall"}') + field(5, 2, b"if_unchanged")
            + field(6, 2, b'{"printer":"desk"}'))
    return head, field(9, 2, field(5, 2, wish)), nonce, s

def wish_up():
    """An Up saying wish 5 was applied, send 1700000000000001 (no rows), length first, check last."""
    fate = field(1, 0, 5) + field(2, 2, b"applied")
    body = (field(1, 0, 1) + field(2, 2, REPLICA) + field(3, 2, SEND_ID) + field(11, 0, SEQ + 1)
            + field(15, 2, fate))
    total = 9 + len(body) + 34
    head = varint(12 << 3 | 1) + total.to_bytes(8, "little") + body
    return head + field(13, 2, hashlib.sha256(head).digest())

def sample_lane_up():
    """The same replica's Up of lane "till" (docs/protocol.md 7.2): one row of table "sales", numbered
    1700000000000001 by the lane's own numbers, its lane (field 16) before the check, as protobuf-c
    packs it (in field order: the length and check are written by hand, first and last)."""
    rows = field(1, 2, b"sales") + field(2, 2, b'{"id":8}') + field(3, 2, field(1, 2, b"8"))
    body = (field(1, 0, 1) + field(2, 2, REPLICA) + field(3, 2, SEND_ID) + field(5, 2, rows)
            + field(11, 0, SEQ + 1) + field(16, 2, b"till"))
    total = 9 + len(body) + 34
    head = varint(12 << 3 | 1) + total.to_bytes(8, "little") + body
    return head + field(13, 2, hashlib.sha256(head).digest())

WRITTEN = 1700000000000000

def bundle(kind, messages):
    """A bundle (docs/protocol.md 11): head, length-prefixed messages, SHA-256 over the whole."""
    out = (b"MSBUNDLE" + (1).to_bytes(2, "big") + bytes([kind, 0]) + REPLICA
           + len(messages).to_bytes(4, "big") + WRITTEN.to_bytes(8, "big"))
    for m in messages:
        out += len(m).to_bytes(4, "big") + m
    return out + hashlib.sha256(out).digest()

# Ed25519 as RFC 8032 section 6 writes it: slow, plain, independent of OpenSSL and libsodium
ED_P = 2 ** 255 - 19
ED_L = 2 ** 252 + 27742317777372353535851937790883648493
ED_D = -121665 * pow(121666, ED_P - 2, ED_P) % ED_P
ED_SQRT_M1 = pow(2, (ED_P - 1) // 4, ED_P)

def ed_add(P, Q):
    A, B = (P[1] - P[0]) * (Q[1] - Q[0]) % ED_P, (P[1] + P[0]) * (Q[1] + Q[0]) % ED_P
    C, D = 2 * P[3] * Q[3] * ED_D % ED_P, 2 * P[2] * Q[2] % ED_P
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F % ED_P, G * H % ED_P, F * G % ED_P, E * H % ED_P)

def ed_mul(s, P):
    Q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            Q = ed_add(Q, P)
        P = ed_add(P, P)
        s >>= 1
    return Q

def ed_recover_x(y, sign):
    x2 = (y * y - 1) * pow(ED_D * y * y + 1, ED_P - 2, ED_P)
    x = pow(x2, (ED_P + 3) // 8, ED_P)
    if (x * x - x2) % ED_P != 0:
        x = x * ED_SQRT_M1 % ED_P
    if x & 1 != sign:
        x = ED_P - x
    return x

ED_GY = 4 * pow(5, ED_P - 2, ED_P) % ED_P
ED_GX = ed_recover_x(ED_GY, 0)
ED_G = (ED_GX, ED_GY, 1, ED_GX * ED_GY % ED_P)

def ed_compress(P):
    zinv = pow(P[2], ED_P - 2, ED_P)
    x, y = P[0] * zinv % ED_P, P[1] * zinv % ED_P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")

def ed_secret(seed):
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]

def ed_public(seed):
    a, _ = ed_secret(seed)
    return ed_compress(ed_mul(a, ED_G))

def ed_sign(seed, msg):
    a, prefix = ed_secret(seed)
    A = ed_compress(ed_mul(a, ED_G))
    r = int.from_bytes(hashlib.sha512(prefix + msg).digest(), "little") % ED_L
    R = ed_compress(ed_mul(r, ED_G))
    h = int.from_bytes(hashlib.sha512(R + A + msg).digest(), "little") % ED_L
    return R + int.to_bytes((r + h * a) % ED_L, 32, "little")

# Signatures (docs/protocol.md 2.4): the server's key, from a fixed seed
SIGN_SEED = bytes(range(0x60, 0x80))
SIGN_DOMAIN = b"magic_sync ToReplica signature 1"

def sign_digest(head, body):
    return hashlib.sha256(SIGN_DOMAIN + hashlib.sha256(head).digest() + hashlib.sha256(body).digest()).digest()

def signed(head, body):
    """head || signature field (14: 0x72 0x40, 64 bytes) || body, and the digest signed"""
    d = sign_digest(head, body)
    return head + field(14, 2, ed_sign(SIGN_SEED, d)) + body, d

def filed_sample():
    """The Filed answer to the sample Up (send 50..5f): its one row filed; head, body."""
    head = field(1, 0, 1) + field(2, 2, EPOCH) + field(8, 2, REPLICA)
    filed = (field(1, 2, SEND_ID) + field(2, 0, 1)
             + field(4, 2, field(1, 2, b"orders") + field(2, 0, 1)))
    return head, field(11, 2, filed)

def c_bytes(b):
    return '"' + "".join("\\x%02x" % x for x in b) + '"'

if __name__ == "__main__":
    for name, keys in DIGESTS:
        n, h = digest(keys)
        print("digest", name, n, "%016x" % h, [canonical(k).decode() for k in keys])
    for kind, written in SPELLINGS:
        print("spelling", kind, repr(written), repr(spelled(kind, written)))
    msg, s = seal(SECRET, REPLICA, EPOCH, NUMBER, NONCE)
    print("seal input", msg.hex())
    print("seal", s.hex())
    head, body = sample()
    print("head", head.hex())
    print("body", body.hex())
    print("message", (head + body).hex())
    head, body, nonce, s = evolve_sample()
    print("evolve nonce", nonce.hex())
    print("evolve seal", s.hex())
    print("evolve head", head.hex())
    print("evolve body", body.hex())
    print("generation", GENERATION)
    print("generation head", generation_head().hex())
    print("applied", applied().hex())
    print("up", sample_up().hex())
    head, body, nonce, s = wish_sample()
    print("wish nonce", nonce.hex())
    print("wish seal", s.hex())
    print("wish head", head.hex())
    print("wish body", body.hex())
    print("wish up", wish_up().hex())
    print("lane up", sample_lane_up().hex())
    head, body = sample()
    print("bundle to", bundle(1, [head + body]).hex())
    print("bundle from", bundle(2, [sample_up()]).hex())
    print("sign seed", SIGN_SEED.hex())
    print("sign public", ed_public(SIGN_SEED).hex())
    head, body = sample()
    m, d = signed(head, body)
    print("sign digest", d.hex())
    print("signature", ed_sign(SIGN_SEED, d).hex())
    print("signed message", m.hex())
    head, body = filed_sample()
    m, d = signed(head, body)
    print("filed head", head.hex())
    print("filed body", body.hex())
    print("filed digest", d.hex())
    print("filed signature", ed_sign(SIGN_SEED, d).hex())
    print("signed filed", m.hex())
    total = 0
    for key, values in ROWS:
        h = row_hash(key, values)
        total = (total + h) & M64
        print("row", key, "%016x" % h)
    print("values", "%016x" % total)
    # range repair of values (docs/protocol.md 8.1): the first ask, of values;
    # the answer of a replica holding only the row [42] = (42, 'tea') of a
    # table (id INTEGER key, name TEXT): bucket 27 at depth 6, its values hash
    ask = (field(1, 2, b"products") + field(2, 0, 1) + field(4, 2, varint(0))
           + field(5, 0, 6) + field(6, 0, 1))
    vh = row_hash(["42"], [42, "tea"])
    answer = (field(1, 2, b"products") + field(2, 0, 2) + field(3, 0, 6) + field(4, 2, varint(27))
              + field(5, 2, varint(1)) + field(6, 2, vh.to_bytes(8, "little")) + field(9, 0, 1))
    print("values range row hash", "%016x" % vh)
    print("values range ask", ask.hex())
    print("values range answer", answer.hex())
