-- What a replica says is a claim (docs/design.md 4.8): the number it pulls
-- after, the seal it gives back, the generation it follows.  A claim moves
-- that replica's own state, never a shared sequence, never the epoch, never
-- another replica; one the server cannot believe is refused, with a clear
-- error, and recorded on that replica alone.  Run as the replicas' own roles,
-- in a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_claims;
\c contrib_regression_claims
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;

CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE tasks (id bigint PRIMARY KEY, store uuid NOT NULL, what text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('tasks', 'catalog', 'assigned(store)');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 5) g;
CREATE ROLE claims_one;
CREATE ROLE claims_two;
CREATE ROLE claims_admin IN ROLE sync_admin;
SELECT sync.replica_add('cccccccc-0000-4000-8000-000000000001', role => 'claims_one');
SELECT sync.replica_add('cccccccc-0000-4000-8000-000000000002', role => 'claims_two');
\set R1 '''cccccccc-0000-4000-8000-000000000001'''
\set R2 '''cccccccc-0000-4000-8000-000000000002'''

-- Messages by hand (docs/protocol.md 2, 6, 7).
CREATE SCHEMA ct;
GRANT USAGE ON SCHEMA ct TO PUBLIC;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
CREATE FUNCTION ct.pb_int(field int, n bigint) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN n = 0 THEN '\x'::bytea ELSE wire.varint(field * 8) || wire.varint(n) END
$$;
-- HMAC-SHA256 (RFC 2104), for seals this server made: the test reads the
-- epoch's secret, as a server's superuser can
CREATE FUNCTION ct.hmac(key bytea, msg bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	k bytea := key || decode(repeat('00', 64 - length(key)), 'hex');
	i bytea := k;
	o bytea := k;
BEGIN
	FOR n IN 0..63 LOOP
		i := set_byte(i, n, get_byte(k, n) # 54);
		o := set_byte(o, n, get_byte(k, n) # 92);
	END LOOP;
	RETURN sha256(o || sha256(i || msg));
END $$;
CREATE FUNCTION ct.seal(r uuid, epoch bytea, number bigint, nonce bytea) RETURNS bytea LANGUAGE sql AS $$
	SELECT ct.hmac((SELECT e.secret FROM sync.epoch e WHERE e.id = epoch), uuid_send(r) || epoch || int8send(number) || nonce)
$$;
CREATE FUNCTION ct.applied(epoch bytea, number bigint, nonce bytea, seal bytea, generation bigint DEFAULT 0)
	RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.pb_bytes(1, epoch) || ct.pb_int(2, number) || wire.pb_bytes(3, nonce) || wire.pb_bytes(4, seal)
	       || ct.pb_int(5, generation)
$$;
-- what a replica that applied message `number` gives back: its epoch,
-- nonce and generation as the server wrote them, and its seal
CREATE FUNCTION ct.proof(r uuid, number bigint) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	e bytea;
	n bytea;
	g bigint := 0;
BEGIN
	SELECT o.epoch, o.nonce, wire.int_field(o.head, 12) INTO e, n, g
	  FROM sync.outbox o WHERE o.replica = r AND o.number = proof.number;
	IF NOT FOUND THEN
		-- acknowledged already: trimmed from the outbox
		SELECT x.acked_epoch, x.acked_nonce INTO e, n FROM sync.replicas x
		 WHERE x.id = r AND x.acked_number = proof.number;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'no message % of replica %', proof.number, r;
		END IF;
		g := 0;
		IF to_regclass('sync.generations') IS NOT NULL THEN
			EXECUTE 'SELECT coalesce(max(generation), 0) FROM sync.generations' INTO g;
		END IF;
	END IF;
	RETURN ct.applied(e, proof.number, n, ct.seal(r, e, proof.number, n), g);
END $$;
-- the same with one bit of its seal flipped
CREATE FUNCTION ct.flipped(applied bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT ct.applied(wire.field(applied, 1), wire.int_field(applied, 2), wire.field(applied, 3),
	                  set_byte(wire.field(applied, 4), 5, get_byte(wire.field(applied, 4), 5) # 16),
	                  wire.int_field(applied, 5))
$$;
-- framed as a replica frames it: its length first (field 12, fixed64), its
-- check last (field 13, SHA-256 of every byte before it), numbered (field 11)
-- above every send before it
CREATE SEQUENCE ct.send_seq;
CREATE FUNCTION ct.up(r uuid, applied bytea) RETURNS bytea LANGUAGE sql AS $$
	SELECT wire.framed(ct.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'))
	       || wire.pb_bytes(4, applied) || ct.pb_int(11, nextval('ct.send_seq')))
$$;
-- a replica acknowledges everything written for it
CREATE FUNCTION ct.ack(r uuid) RETURNS jsonb LANGUAGE sql AS $$
	SELECT sync.file(r, ct.up(r, ct.proof(r, (SELECT last_number FROM sync.replicas WHERE id = r))))
$$;
-- what a call says: ok, or its SQLSTATE, message, and whether it has a detail and a hint
CREATE FUNCTION ct.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hint text;
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
		hint = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || CASE WHEN det <> '' THEN ' [detail]' ELSE '' END
	       || CASE WHEN hint <> '' THEN ' [hint]' ELSE '' END;
END $$;
-- the refusal recorded on a replica, once the alarm that records it (in a
-- transaction of its own: the refused one rolled back) has committed:
-- waits for the claim and reason given, so that no alarm is still on its
-- way when the test goes on
CREATE FUNCTION ct.alarm(r uuid, claim_like text, reason_like text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..400 LOOP
		IF EXISTS (SELECT FROM sync.refused_claims c WHERE c.replica = r
		            AND c.claim LIKE claim_like AND c.reason LIKE reason_like) THEN
			RETURN (SELECT c.claim || ' (' || c.sqlstate || '): ' || c.reason FROM sync.refused_claims c
			         WHERE c.replica = r);
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN NULL;
END $$;
CREATE FUNCTION ct.pass() RETURNS TABLE (provisioned bigint, messages bigint) LANGUAGE sql AS $$
	SELECT provisioned, messages FROM sync.relay_pass()
$$;

BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT (ct.ack(:R1) ->> 'acknowledged')::bigint > 0 AS acked, (ct.ack(:R2) ->> 'acknowledged')::bigint > 0 AS acked;
SELECT encode(id, 'hex') AS epoch FROM sync.epoch WHERE ended IS NULL \gset

-- 1. A number from a replica moves nothing shared (issue 13, hole 1).  Its
-- role pulls after the greatest bigint, with no seal, then with one it made
-- up: refused, and the sequence is where it was.
SELECT last_value AS seq FROM sync.message_seq \gset
SELECT ct.applied(decode(:'epoch', 'hex'), 9223372036854775807, decode(repeat('ab', 16), 'hex'),
                  decode(repeat('cd', 32), 'hex')) AS made_up \gset
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, 9223372036854775807, 1048576)', :R1));
RESET ROLE;
-- recorded on that replica alone: its refused claims, its last_error, sync.health
SELECT ct.alarm(:R1, 'sync.pull%', '%no seal came%');
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, 9223372036854775807, 1048576, %L)', :R1, :'made_up'));
RESET ROLE;
SELECT ct.alarm(:R1, 'sync.pull%', '%not one this server made%');
SELECT last_value = :seq AS sequence_unmoved FROM sync.message_seq;
-- every replica still gets what it should
UPDATE products SET name = 'renamed' WHERE id = 1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT id, provision, last_error LIKE 'sync.pull%' AS last_error FROM sync.replicas ORDER BY id;
SELECT kind, waits_on, replica, reason LIKE 'sync.pull%' AS says_why, sqlstate
  FROM sync.health() WHERE kind = 'claim refused';
SELECT ct.ack(:R1) ->> 'provisioning' AS provisioning, ct.ack(:R2) ->> 'provisioning' AS provisioning;

-- 2. A seal that does not verify never begins an epoch (issue 13, hole 2):
-- one flipped bit in the seal of R2's acknowledgement refuses that upload.
SELECT ct.up(:R2, ct.flipped(ct.proof(:R2, last_number))) AS up FROM sync.replicas WHERE id = :R2 \gset
SET ROLE claims_two;
SELECT ct.try(format('SELECT sync.file(%L, %L)', :R2, :'up'));
RESET ROLE;
SELECT count(*) AS epochs FROM sync.epoch;
SELECT id, provision FROM sync.replicas ORDER BY id;
SELECT ct.alarm(:R2, 'sync.file%', '%not one this server made%');
SELECT kind, replica, reason LIKE 'sync.file%' AS says_why FROM sync.health() WHERE kind = 'claim refused'
 ORDER BY replica;
-- a seal that verifies, of a message this server has no record of writing
-- for R2 (it wrote it, then was restored from an older copy): only R2 is
-- provisioned again
SELECT ct.up(:R2, ct.applied(decode(:'epoch', 'hex'), :seq + 1000, decode(repeat('ab', 16), 'hex'),
                             ct.seal(:R2, decode(:'epoch', 'hex'), :seq + 1000, decode(repeat('ab', 16), 'hex')),
                             (SELECT max(generation) FROM sync.generations))) AS up \gset
SET ROLE claims_two;
SELECT ct.try(format('SELECT sync.file(%L, %L)', :R2, :'up'));
RESET ROLE;
SELECT count(*) AS epochs FROM sync.epoch;
SELECT id, provision, last_error LIKE '%no record of sending it%' AS why FROM sync.replicas ORDER BY id;
-- an epoch this server never had (restored from before its last epoch):
-- only that replica, again
UPDATE sync.replicas SET provision = false WHERE id = :R2;
SELECT ct.up(:R2, ct.applied(decode(repeat('ee', 16), 'hex'), 5, decode(repeat('ab', 16), 'hex'),
                             decode(repeat('cd', 32), 'hex'))) AS up \gset
SET ROLE claims_two;
SELECT ct.try(format('SELECT sync.file(%L, %L)', :R2, :'up'));
RESET ROLE;
SELECT count(*) AS epochs FROM sync.epoch;
SELECT id, provision, last_error LIKE '%never had%' AS why FROM sync.replicas ORDER BY id;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT ct.ack(:R1) ->> 'provisioning' AS provisioning, ct.ack(:R2) ->> 'provisioning' AS provisioning;

-- 3. A claim the server can believe: R1 applied a message this server
-- wrote, and the server was restored from a copy older than it (here, by
-- hand: the message, its place in R1's chain and the sequence go back).
INSERT INTO tasks VALUES (1, :R1, 'count the tea');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT last_number AS lost FROM sync.replicas WHERE id = :R1 \gset
SELECT ct.proof(:R1, :lost) AS lost_proof, ct.flipped(ct.proof(:R1, :lost)) AS lost_flipped \gset
DELETE FROM sync.outbox WHERE replica = :R1 AND number = :lost;
UPDATE sync.replicas SET last_number = acked_number, last_nonce = acked_nonce WHERE id = :R1;
SELECT setval('sync.message_seq', :lost - 1) > 0 AS restored;
-- without the seal it applied, or with a flipped bit, the claim is refused
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, %s, 1048576)', :R1, :lost));
RESET ROLE;
SELECT ct.alarm(:R1, 'sync.pull after message ' || :lost, '%no seal came%') IS NOT NULL AS recorded;
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, %s, 1048576, %L)', :R1, :lost, :'lost_flipped'));
RESET ROLE;
SELECT ct.alarm(:R1, 'sync.pull after message ' || :lost, '%not one this server made%') IS NOT NULL AS recorded;
SELECT last_value = :lost - 1 AS sequence_unmoved FROM sync.message_seq;
-- with its seal: believed.  The sequence moves past it, and R1 alone is
-- provisioned again, to be numbered beyond anything it applied
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, %s, 1048576, %L)', :R1, :lost, :'lost_proof'));
RESET ROLE;
SELECT last_value >= :lost AS sequence_past_it FROM sync.message_seq;
SELECT id, provision, last_error LIKE '%never wrote for it%' AS why FROM sync.replicas ORDER BY id;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT snapshot_number > :lost AS numbered_beyond FROM sync.replicas WHERE id = :R1;
SELECT (ct.ack(:R1) ->> 'acknowledged')::bigint > :lost AS acked;
-- a seal that verifies moves the sequence a bounded distance only (with a
-- secret that leaked, one replica must not burn the number space): beyond
-- it, refused
SELECT last_value AS seq FROM sync.message_seq \gset
SELECT ct.applied(decode(:'epoch', 'hex'), :seq + 2147483649, decode(repeat('ab', 16), 'hex'),
                  ct.seal(:R1, decode(:'epoch', 'hex'), :seq + 2147483649, decode(repeat('ab', 16), 'hex')))
       AS far \gset
SET ROLE claims_one;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, %s, 1048576, %L)', :R1, :seq + 2147483649, :'far'));
RESET ROLE;
SELECT ct.alarm(:R1, 'sync.pull%', '%more than a claim may move it%');
SELECT last_value = :seq AS sequence_unmoved FROM sync.message_seq;
SELECT provision FROM sync.replicas WHERE id = :R1;

-- 4. A blank file (issue 19, item 3): R1's file is deleted and its agent
-- starts again.  It pulls after 0 and says it applied nothing: provisioned
-- again, once, and not again while that snapshot is on its way.
SET ROLE claims_one;
SELECT count(*) >= 0 AS pulled FROM sync.pull(:R1, 0, 1048576, '\x');
RESET ROLE;
SELECT provision, last_error LIKE '%applied nothing%' AS why FROM sync.replicas WHERE id = :R1;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SET ROLE claims_one;
SELECT count(*) > 0 AS pulled FROM sync.pull(:R1, 0, 1048576, '\x');
RESET ROLE;
SELECT provision FROM sync.replicas WHERE id = :R1;
-- without what it applied, a pull after 0 only reads: it claims nothing
SELECT ct.ack(:R1) ->> 'provisioning' AS provisioning;
SELECT count(*) > 0 AS pulled FROM sync.pull(:R1, 0);
SELECT provision FROM sync.replicas WHERE id = :R1;

-- sync.replica_reprovision: an operator's "provision it again", for sync_admin
SET ROLE claims_one;
SELECT sync.replica_reprovision(:R1);
RESET ROLE;
SET ROLE claims_admin;
SELECT sync.replica_reprovision(:R2);
SELECT sync.replica_reprovision('cccccccc-0000-4000-8000-0000000000ff');
SELECT sync.replica_reprovision(NULL);
RESET ROLE;
SELECT id, provision, last_error FROM sync.replicas ORDER BY id;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT ct.ack(:R2) ->> 'provisioning' AS provisioning;

-- 5. Generations (issue 19, item 11): every message carries the
-- generation it was written in, the server's lineage.  The first began with
-- the first epoch, on this server's timeline.
SELECT count(*) AS generations, bool_and(timeline = (pg_control_checkpoint()).timeline_id) AS this_timeline
  FROM sync.generations;
SELECT max(generation) AS g FROM sync.generations \gset
UPDATE products SET name = 'in the first generation' WHERE id = 3;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT count(*) AS messages, bool_and((sync.inspect(o.head || b.bytes) ->> 'generation')::bigint = :g) AS carried
  FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body WHERE NOT o.dropped;
-- a timeline the record was not written on (a standby promoted): a newer
-- generation, and nobody is provisioned for it
UPDATE sync.generations SET timeline = timeline + 1 WHERE generation = :g;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT count(*) AS generations, max(generation) > :g AS raised,
       (SELECT reason FROM sync.generations ORDER BY generation DESC LIMIT 1) LIKE '%timeline%' AS why
  FROM sync.generations;
SELECT count(*) AS provisioning FROM sync.replicas WHERE provision;
UPDATE products SET name = 'after the promotion' WHERE id = 2;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT max(generation) AS g FROM sync.generations \gset
SELECT bool_and((sync.inspect(o.head || b.bytes) ->> 'generation')::bigint = :g) AS newer_carried
  FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body
 WHERE o.number = (SELECT max(number) FROM sync.outbox);
-- a new epoch raises it too
SELECT octet_length(sync.epoch_begin('a claims test')) AS epoch_bytes;
SELECT max(generation) > :g AS raised FROM sync.generations;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ct.pass();
COMMIT;
SELECT (ct.ack(:R1) ->> 'acknowledged')::bigint > 0 AS acked, (ct.ack(:R2) ->> 'acknowledged')::bigint > 0 AS acked;
-- a replica that follows a newer generation of this epoch than the
-- server's: this server was superseded (an old primary that still runs).
-- What it says goes nowhere, with the reason
SELECT max(generation) AS g FROM sync.generations \gset
SELECT last_number AS n FROM sync.replicas WHERE id = :R2 \gset
SELECT ct.applied(wire.field(ct.proof(:R2, :n), 1), :n, wire.field(ct.proof(:R2, :n), 3),
                  wire.field(ct.proof(:R2, :n), 4), :g + 1000000) AS newer \gset
SELECT ct.up(:R2, :'newer') AS up \gset
SET ROLE claims_two;
SELECT ct.try(format('SELECT sync.file(%L, %L)', :R2, :'up'));
RESET ROLE;
SELECT ct.alarm(:R2, 'sync.file%', '%superseded%') IS NOT NULL AS recorded;
SET ROLE claims_two;
SELECT ct.try(format('SELECT * FROM sync.pull(%L, %s, 1048576, %L)', :R2, :n, :'newer'));
RESET ROLE;
SELECT ct.alarm(:R2, 'sync.pull%', '%superseded%') IS NOT NULL AS recorded;
SELECT id, provision FROM sync.replicas ORDER BY id;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_claims WITH (FORCE);
DROP ROLE claims_one;
DROP ROLE claims_two;
DROP ROLE claims_admin;
