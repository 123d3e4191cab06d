"""The agent's pull as the agent sends it, for bench/pullcost.py (MS_PULL_LIBPQ):
libpq's extended protocol through ctypes, binary parameters and results, as
src/agent/server.c does -- the unnamed statement parsed and planned at every
pull ("unnamed"), or one prepared once on the connection and executed by name
("prepared"), what a direct connection could spare (pgbouncer in transaction
pooling cannot keep a statement prepared)."""
import ctypes
import struct

PULL = ("SELECT p.number, p.message FROM pg_catalog.set_config('synchronous_commit', 'off', true) s,"
        " sync.pull($1, $2, $3, $4) p")
UUIDOID, INT8OID, INT4OID, BYTEAOID = 2950, 20, 23, 17
PGRES_COMMAND_OK, PGRES_TUPLES_OK = 1, 2


class Puller:
    def __init__(self, dbname, prepared):
        pq = self.pq = ctypes.CDLL("libpq.so.5")
        pq.PQconnectdb.restype = ctypes.c_void_p
        pq.PQconnectdb.argtypes = [ctypes.c_char_p]
        for f in ("PQexecParams", "PQexecPrepared", "PQprepare"):
            getattr(pq, f).restype = ctypes.c_void_p
        pq.PQexecParams.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        pq.PQexecPrepared.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        pq.PQprepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        pq.PQresultStatus.argtypes = [ctypes.c_void_p]
        pq.PQntuples.argtypes = [ctypes.c_void_p]
        pq.PQgetisnull.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        pq.PQgetlength.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        pq.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        pq.PQgetvalue.restype = ctypes.c_void_p
        pq.PQclear.argtypes = [ctypes.c_void_p]
        pq.PQerrorMessage.argtypes = [ctypes.c_void_p]
        pq.PQerrorMessage.restype = ctypes.c_char_p
        pq.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
        pq.PQresultErrorMessage.restype = ctypes.c_char_p
        pq.PQbackendPID.argtypes = [ctypes.c_void_p]
        self.conn = pq.PQconnectdb(f"dbname={dbname}".encode())
        self.types = (ctypes.c_uint * 4)(UUIDOID, INT8OID, INT4OID, BYTEAOID)
        self.formats = (ctypes.c_int * 4)(1, 1, 1, 1)
        self.prepared = prepared
        if prepared:
            self.check(pq.PQprepare(self.conn, b"pull", PULL.encode(), 4, self.types), PGRES_COMMAND_OK)

    def pid(self):
        return self.pq.PQbackendPID(self.conn)

    def check(self, res, want):
        if self.pq.PQresultStatus(res) != want:
            msg = self.pq.PQresultErrorMessage(res) or self.pq.PQerrorMessage(self.conn)
            self.pq.PQclear(res)
            raise RuntimeError(msg.decode())
        return res

    def pull(self, replica, after, max_bytes, claim):
        args = [replica.bytes, struct.pack("!q", after), struct.pack("!i", max_bytes), bytes(claim)]
        values = (ctypes.c_char_p * 4)(*args)
        lengths = (ctypes.c_int * 4)(*[len(a) for a in args])
        if self.prepared:
            res = self.pq.PQexecPrepared(self.conn, b"pull", 4, values, lengths, self.formats, 1)
        else:
            res = self.pq.PQexecParams(self.conn, PULL.encode(), 4, self.types, values, lengths, self.formats, 1)
        self.check(res, PGRES_TUPLES_OK)
        rows = []
        for i in range(self.pq.PQntuples(res)):
            number = None if self.pq.PQgetisnull(res, i, 0) else struct.unpack(
                "!q", ctypes.string_at(self.pq.PQgetvalue(res, i, 0), 8))[0]
            rows.append((number, ctypes.string_at(self.pq.PQgetvalue(res, i, 1), self.pq.PQgetlength(res, i, 1))))
        self.pq.PQclear(res)
        return rows
