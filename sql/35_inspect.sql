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

-- a domain travels as its base type: a proto row's integer over a domain is a
-- varint (zigzag), as the schema and sync.proto say, never its text
CREATE DOMAIN qty AS integer CHECK (VALUE >= 0);
CREATE TABLE bins (id int PRIMARY KEY, n qty NOT NULL);
INSERT INTO bins VALUES (1, 7);
SELECT sync.mirror('bins', 'catalog', 'broadcast', codec => 'proto');
SELECT sync.replica_add('bbbbbbbb-0000-4000-8000-000000000001');
SET default_transaction_isolation = 'repeatable read';
SELECT provisioned FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT u AS upsert
  FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body,
       LATERAL jsonb_array_elements(sync.inspect(o.head || b.bytes) -> 'down' -> 'tables') t,
       LATERAL jsonb_array_elements_text(t -> 'upserts') u
 WHERE t ->> 'table' = 'bins';
SELECT line FROM regexp_split_to_table(sync.proto('bins'), E'\n') line WHERE line LIKE '%n =%';
