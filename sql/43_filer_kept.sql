-- The catalog sync.file reads, kept across the calls of a session
-- (transport/filer.c): what changed between two filings of one session is
-- seen by the second -- a declaration (a table mirrored, unmirrored), a
-- column added, noting triggers disabled and enabled again.  In a database
-- of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_filer;
\c contrib_regression_filer
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;

CREATE TABLE sales (store uuid, id int, amount int, PRIMARY KEY (store, id));
CREATE TABLE refunds (store uuid, id int, amount int, PRIMARY KEY (store, id));
SELECT sync.mirror('sales', 'record', key => '{store,id}', origin => 'store');

-- Uploads as a replica makes them (docs/protocol.md, section 7): protobuf by hand.
CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- An Up acknowledging the last message written, with rows [{table, key, row}]
CREATE FUNCTION t.up(r uuid, rows jsonb) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	o record;
	x jsonb;
BEGIN
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'));
	SELECT * INTO o FROM sync.outbox WHERE replica = r AND number = (SELECT last_number FROM sync.replicas WHERE id = r);
	IF FOUND THEN
		m := m || wire.pb_bytes(4, wire.pb_bytes(1, o.epoch) || wire.pb_int(2, o.number)
		                        || wire.pb_bytes(3, o.nonce) || wire.pb_bytes(4, wire.seal(o.head)));
	END IF;
	FOR x IN SELECT * FROM jsonb_array_elements(rows) LOOP
		m := m || wire.pb_bytes(5, wire.pb_text(1, x ->> 'table')
		                        || wire.pb_bytes(2, convert_to((x -> 'row')::text, 'UTF8'))
		                        || wire.pb_key(3, x -> 'key'));
	END LOOP;
	m := m || wire.pb_int(11, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	RETURN wire.framed(m);
END $$;
-- one row of tab filed: what became of it
CREATE FUNCTION t.file(tab text, id int, extra jsonb DEFAULT '{}') RETURNS text LANGUAGE sql AS $$
	SELECT (SELECT jsonb_build_object('filed', f -> 'filed', 'refused', f -> 'refused', 'waiting', f -> 'waiting')::text
	          || coalesce(' ' || (f #>> '{reasons,refused,0}'), '')
	          FROM sync.file('00000000-0000-0000-0000-00000000000a',
	                         t.up('00000000-0000-0000-0000-00000000000a', jsonb_build_array(jsonb_build_object(
	                           'table', tab,
	                           'key', jsonb_build_array('00000000-0000-0000-0000-00000000000a', id::text),
	                           'row', jsonb_build_object('store', '00000000-0000-0000-0000-00000000000a', 'id', id,
	                                                     'amount', 10 * id) || extra)))) f)
$$;

SELECT sync.replica_add('00000000-0000-0000-0000-00000000000a');
SELECT provisioned FROM sync.relay_pass();

-- one session throughout
SELECT t.file('sales', 1) AS filed;
-- a declaration: refunds is not mirrored, then is
SELECT t.file('refunds', 1) AS not_mirrored;
SELECT sync.mirror('refunds', 'record', key => '{store,id}', origin => 'store');
SELECT t.file('refunds', 2) AS mirrored;
-- a column added: a row that carries it is filed with it
SELECT t.file('sales', 2, '{"memo": "new"}') AS before_the_column;
ALTER TABLE sales ADD COLUMN memo text;
SELECT t.file('sales', 3, '{"memo": "new"}') AS with_the_column;
-- its noting triggers disabled: its rows wait; enabled again: filed
ALTER TABLE sales DISABLE TRIGGER USER;
SELECT t.file('sales', 4) AS triggers_off;
SELECT sync.retrigger('sales');
SELECT t.file('sales', 5) AS triggers_on;
-- unmirrored: refused
SELECT sync.unmirror('refunds');
SELECT t.file('refunds', 3) AS unmirrored;
-- within one transaction, and rolled back: seen, then not
BEGIN;
SELECT sync.unmirror('sales');
SELECT t.file('sales', 6) AS unmirrored_in_transaction;
ROLLBACK;
SELECT t.file('sales', 7) AS rolled_back;
SELECT id, amount, memo FROM sales ORDER BY id;
SELECT id FROM refunds ORDER BY id;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_filer;
