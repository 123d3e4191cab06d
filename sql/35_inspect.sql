-- sync.inspect reads what it is handed with the checks a replica applies,
-- and never trusts more of it than those checks cover.

-- a later protocol's message: its head only (its fields are unchecked: a
-- replica of no uuid's length, a body whose names are not even text)
SELECT sync.inspect('\x0802');
SELECT sync.inspect('\x08024203aabbcc4a0612040a02fffe');
-- the same body under this build's protocol is refused, saying why
SELECT sync.inspect('\x08014203aabbcc4a0612040a02fffe');
SELECT sync.inspect('\x08');

-- an upsert that looks like JSON and is not shows as hex; one that is, as JSON
-- (the jsonb input function judges, in a subtransaction of its own)
CREATE TEMP TABLE m AS
WITH parts AS (
	SELECT '\x0801'::bytea
	       || '\x1210'::bytea || decode(repeat('11', 16), 'hex')	-- epoch
	       || '\x1801'::bytea										-- number 1
	       || '\x2210'::bytea || decode(repeat('22', 16), 'hex')	-- nonce
	       || '\x3a20'::bytea || decode(repeat('33', 32), 'hex')	-- seal
	       || '\x4210'::bytea || decode('aaaaaaaa000000000000000000000001', 'hex')	-- replica
	       AS head,
	       '\x0a0174'::bytea										-- table "t"
	       || '\x12047b626164'::bytea								-- upsert "{bad"
	       || '\x12077b2261223a317d'::bytea							-- upsert {"a":1}
	       || '\x1a030a0131'::bytea || '\x1a030a0132'::bytea		-- keys 1, 2
	       AS rows_
)
SELECT head || '\x4a'::bytea || set_byte('\x00'::bytea, 0, length(d)) || d AS message
  FROM parts, LATERAL (SELECT '\x12'::bytea || set_byte('\x00'::bytea, 0, length(rows_)) || rows_) AS down(d);
SELECT jsonb_pretty(sync.inspect(message)) FROM m;
-- in the caller's transaction, which goes on as if nothing had failed
BEGIN;
SELECT sync.inspect(message) -> 'down' -> 'tables' -> 0 -> 'upserts' AS upserts FROM m;
SELECT 1 AS still_in_the_transaction;
COMMIT;
