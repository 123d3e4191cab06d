-- Causal versions (issue 18.3, docs/protocol.md 12): version => 'hlc' on a
-- record table, declared and validated; filing by the clock stamp, equal
-- stamps ordered by the row whatever the order of the uploads; the server's
-- clock (sync.clock) merged from uploads, bounded, and carried by its
-- messages.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_hlc;
\c contrib_regression_hlc
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

-- Declaring
CREATE TABLE none_here (store uuid, id int, amount int, PRIMARY KEY (store, id));
SELECT sync.mirror('none_here', 'record', key => '{store,id}', origin => 'store', version => 'hlc');
SELECT sync.mirror('none_here', 'record', key => '{store,id}', origin => 'store', version => 'hlc(stamp)');
CREATE TABLE texty (store uuid, id int, hlc text NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('texty', 'record', key => '{store,id}', origin => 'store', version => 'hlc');
CREATE TABLE nullable (store uuid, id int, hlc bigint, PRIMARY KEY (store, id));
SELECT sync.mirror('nullable', 'record', key => '{store,id}', origin => 'store', version => 'hlc');
CREATE TABLE cat (id int PRIMARY KEY, hlc bigint NOT NULL);
SELECT sync.mirror('cat', 'catalog', 'broadcast', version => 'hlc');
-- a column called hlc the host stamps itself: quoted, a plain version
CREATE TABLE hosts (store uuid, id int, hlc timestamptz NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('hosts', 'record', key => '{store,id}', origin => 'store', version => '"hlc"');
-- the clock's columns
CREATE TABLE sales (store uuid, id int, amount int NOT NULL, hlc bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (store, id));
SELECT sync.mirror('sales', 'record', key => '{store,id}', origin => 'store', version => 'hlc');
CREATE DOMAIN stamp AS bigint;
CREATE TABLE counts (store uuid, id int, n int, at stamp NOT NULL, PRIMARY KEY (store, id));
SELECT sync.mirror('counts', 'record', key => '{store,id}', origin => 'store', version => 'hlc(at)');
SELECT name, version, hlc FROM sync.mirrors ORDER BY name;
-- a column that stops being bigint is a problem sync.check reports
ALTER TABLE counts ALTER COLUMN at TYPE int;
SELECT problem, detail FROM sync.check() WHERE problem LIKE 'hlc%';
ALTER TABLE counts ALTER COLUMN at TYPE stamp;
SELECT count(*) FROM sync.check();

-- Uploads as a replica makes them (docs/protocol.md, section 7): protobuf by hand.
CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- An Up: the last message applied (0: none; default: the last written),
-- rows [{table, key, row}], refusals [{table, key, reason}], backlog [{table,
-- unsent, unfiled, set_aside, refused}]
CREATE FUNCTION t.up(r uuid, applied bigint DEFAULT -1, rows jsonb DEFAULT '[]',
	refusals jsonb DEFAULT '[]', backlog jsonb DEFAULT '[]', clock bigint DEFAULT 0) RETURNS bytea
	LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	o record;
	x jsonb;
BEGIN
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'));
	IF applied = -1 THEN
		SELECT last_number INTO applied FROM sync.replicas WHERE id = r;
	END IF;
	SELECT * INTO o FROM sync.outbox WHERE replica = r AND number = applied;
	IF FOUND THEN
		m := m || wire.pb_bytes(4, wire.pb_bytes(1, o.epoch) || wire.pb_int(2, o.number)
		                        || wire.pb_bytes(3, o.nonce) || wire.pb_bytes(4, wire.seal(o.head)));
	END IF;
	FOR x IN SELECT * FROM jsonb_array_elements(rows) LOOP
		m := m || wire.pb_bytes(5, wire.pb_text(1, x ->> 'table')
		                        || wire.pb_bytes(2, convert_to((x -> 'row')::text, 'UTF8'))
		                        || wire.pb_key(3, x -> 'key'));
	END LOOP;
	FOR x IN SELECT * FROM jsonb_array_elements(refusals) LOOP
		m := m || wire.pb_bytes(6, wire.pb_text(1, x ->> 'table') || wire.pb_key(2, x -> 'key')
		                        || wire.pb_text(3, x ->> 'reason'));
	END LOOP;
	FOR x IN SELECT * FROM jsonb_array_elements(backlog) LOOP
		m := m || wire.pb_bytes(8, wire.pb_text(1, x ->> 'table') || wire.pb_int(2, (x ->> 'unsent')::bigint)
		                        || wire.pb_int(3, (x ->> 'unfiled')::bigint)
		                        || wire.pb_int(4, (x ->> 'set_aside')::bigint)
		                        || wire.pb_int(5, (x ->> 'refused')::bigint));
	END LOOP;
	IF clock <> 0 THEN
		m := m || wire.pb_int(17, clock);
	END IF;
	-- numbered as a replica numbers its sends, its length first and its check last
	m := m || wire.pb_int(11, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	RETURN wire.framed(m);
END $$;
CREATE FUNCTION t.sale(r uuid, id int, amount int, stamp bigint) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('table', 'sales', 'key', jsonb_build_array(r::text, id::text),
		'row', jsonb_build_object('store', r, 'id', id, 'amount', amount, 'hlc', stamp))
$$;
CREATE FUNCTION t.file(r uuid, rows jsonb, clock bigint DEFAULT 0) RETURNS jsonb LANGUAGE sql AS $$
	SELECT sync.file(r, t.up(r, -1, rows, '[]', '[]', clock)) - 'seq'
$$;
-- the physical time now as a stamp, counter 0
CREATE FUNCTION t.now_stamp(plus_ms bigint DEFAULT 0) RETURNS bigint LANGUAGE sql AS $$
	SELECT ((extract(epoch FROM clock_timestamp()) * 1000)::bigint + plus_ms) << 16
$$;

SELECT sync.replica_add('00000000-0000-0000-0000-00000000000a');
SELECT provisioned FROM sync.relay_pass();
-- the snapshot's messages carry the server's clock (a ToReplica's field 13): at least the physical time
SELECT count(*) AS messages, bool_and(wire.int_field(head, 13) BETWEEN t.now_stamp(-600000) AND t.now_stamp())
  FROM sync.outbox;

-- Filing: the newest stamp wins
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 1, 10, 1000)));
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 1, 5, 999)));
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 1, 20, 1001)));
SELECT id, amount, hlc FROM sales ORDER BY id;
-- equal stamps: the greater row wins, whichever is filed first
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 2, 7, 2000)));
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 2, 8, 2000)));
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 3, 8, 2000)));
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 3, 7, 2000)));
SELECT id, amount, hlc FROM sales ORDER BY id;
-- the same row again is filed (the server has it)
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 3, 8, 2000)));

-- The server's clock: merged from an upload (an hour ahead of the server's time is fine) ...
SELECT t.now_stamp(3600000) AS ahead \gset
SELECT t.file('00000000-0000-0000-0000-00000000000a', '[]', :ahead) ->> 'filed' AS filed;
SELECT hlc = :ahead AS merged FROM sync.clock;
-- ... and carried by the answer, and by the next messages the relay writes
SELECT wire.int_field(message, 13) >= :ahead AS answer_carries FROM sync.answers
 WHERE replica = '00000000-0000-0000-0000-00000000000a' ORDER BY filed DESC LIMIT 1;
INSERT INTO sales VALUES ('00000000-0000-0000-0000-00000000000a', 9, 1, 1);
SELECT rows_sent FROM sync.relay_pass();
SELECT wire.int_field(head, 13) >= :ahead AS message_carries FROM sync.outbox
 WHERE replica = '00000000-0000-0000-0000-00000000000a' ORDER BY number DESC LIMIT 1;
-- ... a stamp filed merges too
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 4, 1, :ahead + 7))) ->> 'filed' AS filed;
SELECT hlc = :ahead + 7 AS merged FROM sync.clock;
-- ... but a clock thirty days ahead, from the network, is not merged, and the upload is filed
SELECT t.now_stamp(30 * 86400000::bigint) AS absurd \gset
SELECT t.file('00000000-0000-0000-0000-00000000000a',
	jsonb_build_array(t.sale('00000000-0000-0000-0000-00000000000a', 5, 1, :absurd)), :absurd) ->> 'filed' AS filed;
SELECT hlc = :ahead + 7 AS unchanged FROM sync.clock;

\c contrib_regression
DROP DATABASE contrib_regression_hlc;
