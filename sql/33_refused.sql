-- A row a replica refused comes back by itself (issue 19.6): sent again to
-- that replica alone, rebuilt from the current row, a minute after the
-- refusal, the wait doubling to an hour (sync.refused_rows), and at once
-- when the replica reports a new build (Up.build, field 14) or protocol.
-- Time is driven by moving the recorded due time, as superuser.  In a
-- database of its own, so that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_refused;
\c contrib_regression_refused
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee'), (3, 'cocoa');

-- Uploads as a replica makes them (docs/protocol.md, section 7): protobuf by hand.
CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- An Up: the last message applied (0: none; default: the last written),
-- rows [{table, key, row}], refusals [{table, key, reason}], backlog [{table,
-- unsent, unfiled, set_aside, refused}]
-- An Up: the last message applied (default: the last written), refusals
-- [{table, key, reason}], and its build (field 14; NULL: none, as a library
-- from before it writes); without ack, no last message applied
CREATE FUNCTION t.up(r uuid, refusals jsonb DEFAULT '[]', build text DEFAULT 'b1', ack boolean DEFAULT true) RETURNS bytea
	LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	o record;
	x jsonb;
BEGIN
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'));
	SELECT * INTO o FROM sync.outbox WHERE replica = r AND ack
	   AND number = (SELECT last_number FROM sync.replicas WHERE id = r);
	IF FOUND THEN
		m := m || wire.pb_bytes(4, wire.pb_bytes(1, o.epoch) || wire.pb_int(2, o.number)
		                        || wire.pb_bytes(3, o.nonce) || wire.pb_bytes(4, wire.seal(o.head)));
	END IF;
	FOR x IN SELECT * FROM jsonb_array_elements(refusals) LOOP
		m := m || wire.pb_bytes(6, wire.pb_text(1, x ->> 'table') || wire.pb_key(2, x -> 'key')
		                        || wire.pb_text(3, x ->> 'reason'));
	END LOOP;
	m := m || wire.pb_int(11, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	IF build IS NOT NULL THEN
		m := m || wire.pb_text(14, build);
	END IF;
	RETURN wire.framed(m);
END $$;
CREATE FUNCTION t.file(r uuid, refusals jsonb DEFAULT '[]', build text DEFAULT 'b1', ack boolean DEFAULT true)
	RETURNS boolean LANGUAGE sql AS $$
	SELECT sync.file(r, t.up(r, refusals, build, ack)) IS NOT NULL
$$;
-- replica 2 refuses product 2
CREATE FUNCTION t.refuse(build text DEFAULT 'b1', ack boolean DEFAULT true) RETURNS boolean LANGUAGE sql AS $$
	SELECT t.file('00000000-0000-0000-0000-000000000002',
		'[{"table": "products", "key": ["2"], "reason": "the replica''s table refused it: CHECK constraint failed"}]', build, ack)
$$;
CREATE FUNCTION t.ack_all() RETURNS void LANGUAGE sql AS $$
	SELECT t.file(id) FROM sync.replicas WHERE live ORDER BY id
$$;
-- what the last pass wrote to whom: the replicas with messages not acknowledged
CREATE FUNCTION t.sent() RETURNS TABLE (replica uuid, sent boolean) LANGUAGE sql AS $$
	SELECT r.id, r.last_number > r.acked_number FROM sync.replicas r ORDER BY r.id
$$;
-- the backoff of product 2 at replica 2: how often, how long it waits, and whether it is due
CREATE FUNCTION t.backoff() RETURNS TABLE (times int, waits interval, due boolean, held_refused boolean)
	LANGUAGE sql AS $$
	SELECT r.times, date_trunc('second', r.due - r.refused_at), r.due <= now(), h.refused IS NOT NULL
	  FROM sync.refused_rows r JOIN sync.held h USING (replica, tab, key)
	 WHERE r.replica = '00000000-0000-0000-0000-000000000002' AND r.key = sync.key('{2}')
$$;
-- the recorded due time moved into the past: time has passed
CREATE FUNCTION t.later() RETURNS void LANGUAGE sql AS $$
	UPDATE sync.refused_rows SET due = now() - interval '1 second' WHERE due IS NOT NULL
$$;

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000003');
SELECT provisioned FROM sync.relay_pass();
SELECT t.ack_all();
SELECT id, build, protocol FROM sync.replicas ORDER BY id;

-- replica 2 cannot take product 2: it refuses it; tried again a minute later
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT kind, replica, tab, key, count, since IS NOT NULL AS since,
       regexp_replace(reason, 'again at [^,]*,', 'again at T,') AS reason
  FROM sync.health() WHERE kind = 'rows refused';
-- said again (its answer not applied yet): the same refusal, counted once
SELECT t.refuse();
SELECT * FROM t.backoff();
-- not before it is due: a pass with nothing to do sends nothing, and one
-- that sends a change to every replica does not send it along
SELECT rows_sent FROM sync.relay_pass();
UPDATE products SET name = 'green tea' WHERE id = 1;
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.sent();
SELECT t.ack_all();
SELECT * FROM t.backoff();

-- due: sent to replica 2 alone (replicas 1 and 3 hold the row: nothing for them)
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.sent();
SELECT * FROM t.backoff();
-- it goes once: the next pass sends nothing
SELECT rows_sent FROM sync.relay_pass();
-- its refusal said again before it applied the row sent (its answer not
-- applied yet): of the version before, not counted, the row on its way not marked
SELECT t.refuse(ack => false);
SELECT * FROM t.backoff();
-- refused again: the wait doubles, to an hour at most
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT t.refuse();
SELECT * FROM t.backoff();
SELECT * FROM t.sent();

-- the row changed on the server: it goes at once, to every holder, and the
-- count starts again
UPDATE products SET name = 'dark coffee' WHERE id = 2;
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.sent();
SELECT t.file('00000000-0000-0000-0000-000000000001'), t.file('00000000-0000-0000-0000-000000000003');
SELECT t.refuse();
SELECT * FROM t.backoff();

-- a new build (a fix deployed on the replica): due at once, long before its minute
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b2');
SELECT build FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002';
SELECT * FROM t.backoff();
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.sent();
-- the same build again makes nothing due
SELECT t.refuse('b2');
SELECT * FROM t.backoff();
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b2');
SELECT due FROM t.backoff();
-- another build within ten minutes of the one that made them due (issue
-- 38.2: a replica saying a new build in every upload had its refused rows
-- sent at every pass): recorded, but the rows are due no sooner than ten
-- minutes after that one; a row due before then keeps its time
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b3');
SELECT build FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002';
SELECT times, waits, due FROM t.backoff();
-- one that waits longer (here its wait moved by hand to an hour) is due then
UPDATE sync.refused_rows SET due = now() + interval '1 hour'
 WHERE replica = '00000000-0000-0000-0000-000000000002';
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b4');
SELECT r.times, r.due = x.build_due AS at_build_due,
       date_trunc('minute', r.due - now() + interval '30 seconds') AS due_in
  FROM sync.refused_rows r JOIN sync.replicas x ON x.id = r.replica
 WHERE r.replica = '00000000-0000-0000-0000-000000000002';
SELECT rows_sent FROM sync.relay_pass();
-- ten minutes later (the last build's time moved back by hand)
UPDATE sync.replicas SET build_due = build_due - interval '20 minutes'
 WHERE id = '00000000-0000-0000-0000-000000000002';
-- a new protocol counts as a new build: written here by hand as an older one
UPDATE sync.replicas SET protocol = 0 WHERE id = '00000000-0000-0000-0000-000000000002';
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b4');
SELECT due FROM t.backoff();
SELECT rows_sent FROM sync.relay_pass();
-- taken at last: refused no more, its count over
SELECT t.file('00000000-0000-0000-0000-000000000002', build => 'b4');
SELECT count(*) FROM sync.refused_rows;
SELECT count(*) FROM sync.held WHERE refused IS NOT NULL;
SELECT count(*) FROM sync.health() WHERE kind = 'rows refused';

-- an Up without field 14 (a library from before it) is filed, its build ''
SELECT t.file('00000000-0000-0000-0000-000000000003', build => NULL);
SELECT build, protocol FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000003';
-- the upload's check covers its build: one changed on the way is refused
SELECT sync.file('00000000-0000-0000-0000-000000000003',
	overlay(u PLACING convert_to('X', 'UTF8') FROM position(convert_to('build-zzzz-9', 'UTF8') IN u) FOR 1))
  FROM t.up('00000000-0000-0000-0000-000000000003', build => 'build-zzzz-9') u;
-- a build longer than 200 bytes is refused
SELECT sync.file('00000000-0000-0000-0000-000000000003', t.up('00000000-0000-0000-0000-000000000003', build => repeat('b', 201)));
SELECT build FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000003';

-- a row refused by a replica that then lets go of it: its count goes with it
SELECT t.refuse();
SELECT count(*) FROM sync.refused_rows;
DELETE FROM products WHERE id = 2;
SELECT rows_taken FROM sync.relay_pass();
SELECT t.ack_all();
SELECT count(*) FROM sync.refused_rows;

-- sending one again fails for good (a bug of the app's in reading the row:
-- here a row security policy that raises): no note to park, so it waits an
-- hour and the pass goes on without it
CREATE FUNCTION t.readable(id bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF id = 3 AND current_setting('t.broken', true) = 'on' THEN
		RAISE EXCEPTION 'a bug reading product %', id;
	END IF;
	RETURN true;
END $$;
CREATE POLICY readable ON products USING (t.readable(id));
-- owned by a role that is no superuser: the relay reads it as its owner, policies applied
CREATE ROLE refused_owner;
GRANT USAGE ON SCHEMA t TO refused_owner;
ALTER TABLE products OWNER TO refused_owner;
ALTER TABLE products ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
SELECT t.file('00000000-0000-0000-0000-000000000002',
	'[{"table": "products", "key": ["3"], "reason": "the replica''s table refused it"}]');
SET t.broken = on;
SELECT t.later();
SELECT rows_sent FROM sync.relay_pass();
SELECT times, date_trunc('hour', due - now() + interval '1 minute') AS waits
  FROM sync.refused_rows WHERE key = sync.key('{3}');
RESET t.broken;
ALTER TABLE products DISABLE ROW LEVEL SECURITY;

-- a replica no longer live is forgotten, its held rows let go: the counts of
-- its refused rows end with them (before: due forever, and every pass asked)
SELECT (SELECT count(*) FROM sync.refused_rows WHERE replica = '00000000-0000-0000-0000-000000000002') AS refused,
       (SELECT count(*) FROM sync.refused_due WHERE replica = '00000000-0000-0000-0000-000000000002') AS due;
SELECT sync.replica_set('00000000-0000-0000-0000-000000000002', live => false);
SELECT rows_sent FROM sync.relay_pass();
SELECT (SELECT count(*) FROM sync.refused_rows WHERE replica = '00000000-0000-0000-0000-000000000002') AS refused,
       (SELECT count(*) FROM sync.refused_due WHERE replica = '00000000-0000-0000-0000-000000000002') AS due;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_refused;
DROP ROLE refused_owner;
