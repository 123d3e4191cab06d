-- Settings and wishes (src/pg/relay/wish.c, wish_send.c, transport/wish_fates.c; docs/
-- protocol.md 5.4): a setting table is a record of one row per replica,
-- keyed by its origin alone; sync.wish, for the table's owner, records a
-- wish for one replica's row, refuses every misuse with its own SQLSTATE,
-- detail and hint; a newer wish supersedes a pending one; the relay sends a
-- wish once, in a message of its own; the fates an upload carries are filed
-- while the wish is pending.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_wishes;
\c contrib_regression_wishes
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;
SET default_transaction_isolation = 'repeatable read';

CREATE ROLE wish_owner IN ROLE sync_admin;
CREATE ROLE wish_admin IN ROLE sync_admin;
CREATE ROLE wish_nobody;
CREATE ROLE wish_replica;
GRANT CREATE ON SCHEMA public TO wish_owner;
\set R1 '''aaaaaaaa-0000-4000-8000-000000000001'''
\set R2 '''aaaaaaaa-0000-4000-8000-000000000002'''
SELECT sync.replica_add(:R1, role => 'wish_replica');
SELECT sync.replica_add(:R2);

-- what a call says: ok, or its SQLSTATE, message, and whether it has a detail and a hint
CREATE FUNCTION try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hint text;
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN st || ' ' || msg || CASE WHEN det <> '' THEN ' [detail]' ELSE '' END || CASE WHEN hint <> '' THEN ' [hint]' ELSE '' END;
END $$;
GRANT EXECUTE ON FUNCTION try(text) TO PUBLIC;

-- Declaring, as a table owner who is no superuser
SET ROLE wish_owner;
CREATE TABLE store_settings (store uuid PRIMARY KEY, printer text, opens time, seats int CHECK (seats >= 0));
CREATE TABLE two_keys (store uuid, n int, printer text, PRIMARY KEY (store, n));
CREATE TABLE no_origin (id int PRIMARY KEY, printer text);
CREATE TABLE products (id int PRIMARY KEY, name text);
CREATE TABLE sales (store uuid, id int, total int, PRIMARY KEY (store, id));
SELECT sync.mirror('store_settings', 'setting', 'assigned(store)', origin => 'store');
SELECT try($$SELECT sync.mirror('two_keys', 'setting', 'assigned(store)', origin => 'store')$$);
SELECT try($$SELECT sync.mirror('no_origin', 'setting', 'broadcast')$$);
SELECT try($$SELECT sync.mirror('no_origin', 'settings', 'broadcast')$$);
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT sync.mirror('sales', 'record', 'assigned(store)', origin => 'store');
RESET ROLE;
SELECT name, mirror FROM sync.mirrors ORDER BY name;
SELECT mirror FROM sync.tables WHERE name = 'store_settings';

-- The replica's row as the server last filed it (what an upload would file)
INSERT INTO store_settings VALUES (:R1, 'hall', '09:00', 4);

-- Misuse, each with its SQLSTATE, a detail and a hint
SET ROLE wish_owner;
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'no_origin', :R1, '{"printer": "x"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'products', :R1, '{"name": "x"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'sales', :R1, '{"total": 1}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', 'bbbbbbbb-0000-4000-8000-000000000009', '{"printer": "x"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"store": "aaaaaaaa-0000-4000-8000-000000000002"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"colour": "red"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '["hall"]'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"seats": "many"}'));
SELECT try(format('SELECT sync.wish(%L, %L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}', 'sometimes'));
SELECT try(format('SELECT sync.wish(%L, %L, NULL)', 'store_settings', :R1));
RESET ROLE;
-- a dropped replica
SELECT sync.replica_add('aaaaaaaa-0000-4000-8000-000000000003');
SELECT sync.replica_drop('aaaaaaaa-0000-4000-8000-000000000003');
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', 'aaaaaaaa-0000-4000-8000-000000000003', '{"printer": "x"}'));

-- Who may call it: the table's owner; not sync_admin alone, not PUBLIC, never a replica's role
SET ROLE wish_admin;
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}'));
SET ROLE wish_nobody;
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}'));
SET ROLE wish_replica;
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}'));
RESET ROLE;
-- a replica's role that owns the table and administers is refused all the same
GRANT sync_admin TO wish_replica;
ALTER TABLE store_settings OWNER TO wish_replica;
SET ROLE wish_replica;
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}'));
RESET ROLE;
ALTER TABLE store_settings OWNER TO wish_owner;
REVOKE sync_admin FROM wish_replica;
SELECT has_function_privilege('wish_nobody', 'sync.wish(regclass, uuid, jsonb, text)', 'EXECUTE') AS public_may,
       has_table_privilege('wish_nobody', 'sync.wishes', 'SELECT') AS public_reads;

-- Wishes: pending, the newer superseding the older, sent once by the relay
SET ROLE wish_owner;
SELECT sync.wish('store_settings', :R1, '{"printer": "office"}') AS w1 \gset
SELECT sync.wish('store_settings', :R1, '{"printer": "back"}', 'if_unchanged') AS w2 \gset
SELECT sync.wish('store_settings', :R2, '{"printer": "till", "seats": 2}', 'if_unchanged') AS w3 \gset
RESET ROLE;
SELECT id - :w1 AS n, replica, "table", key, "values", apply, fate, why, made IS NOT NULL AS made,
       decided IS NOT NULL AS decided, sent_in IS NOT NULL AS sent
  FROM sync.wishes ORDER BY id;
-- what if_unchanged carries: the columns it sets as the server last filed them (none for R2)
SELECT id - :w1 AS n, expected FROM sync.wish_list ORDER BY id;

SELECT provisioned, messages > 0 AS wrote FROM sync.relay_pass();
SELECT id - :w1 AS n, fate, sent_in IS NOT NULL AS sent FROM sync.wishes ORDER BY id;
-- the wishes go in the last message of each replica, of wishes only; the superseded one never
SELECT o.replica, j->'down'->'wishes' AS wishes, j->'down'->'tables' AS tables
  FROM sync.outbox o, sync.inspect(o.head || (SELECT b.bytes FROM sync.bodies b WHERE b.id = o.body)) j
 WHERE j->'down' ? 'wishes' ORDER BY o.replica;
-- a pass with nothing new sends nothing again
SELECT notes_read, messages FROM sync.relay_pass();

-- A wish made with nothing else to send wakes a pass that sends it alone
SET ROLE wish_owner;
SELECT sync.wish('store_settings', :R2, '{"printer": "door"}') AS w4 \gset
RESET ROLE;
SELECT notes_read, provisioned, messages FROM sync.relay_pass();
SELECT id - :w1 AS n, fate, why IS NOT NULL AS says_why, sent_in IS NOT NULL AS sent FROM sync.wishes ORDER BY id;

-- Fates filed from an upload (Up field 15), as a replica sends them
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
CREATE SEQUENCE send_seq;
CREATE FUNCTION fate(id bigint, fate text, why text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.pb_bytes(15, wire.pb_int(1, id) || wire.pb_bytes(2, convert_to(fate, 'UTF8')) || wire.pb_bytes(3, convert_to(why, 'UTF8')))
$$;
CREATE FUNCTION up(r uuid, fates bytea) RETURNS bytea LANGUAGE sql AS $$
	SELECT wire.framed(wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'))
	       || wire.pb_int(11, nextval('send_seq')) || fates)
$$;
-- R1 applied w2; it says it applied w1 too, which was superseded before it
-- was ever sent: not believed.  R2 applied w3 before w4 came (the server
-- superseded w3 once w4 was made, after it was sent: what the replica did
-- replaces that), declined w4, and says w1's fate, which is not its own
SELECT (sync.file(:R1, up(:R1, fate(:w1, 'applied', '') || fate(:w2, 'applied', ''))))->'filed' AS filed;
SELECT (sync.file(:R2, up(:R2, fate(:w3, 'applied', '') || fate(:w4, 'declined', 'the replica changed its row')
                                || fate(:w1, 'declined', 'not mine')))) IS NOT NULL AS filed;
SELECT id - :w1 AS n, replica, fate, why, decided IS NOT NULL AS decided FROM sync.wishes ORDER BY id;
-- the same fates again (an upload lost, sent again) change nothing; a later different one neither
SELECT (sync.file(:R1, up(:R1, fate(:w2, 'declined', 'again')))) IS NOT NULL AS filed;
SELECT id - :w1 AS n, fate, why FROM sync.wishes WHERE replica = :R1 ORDER BY id;
-- malformed fates refuse the upload, changing nothing
SELECT try(format('SELECT sync.file(%L, %L)', :R1, up(:R1, fate(:w2, 'maybe', ''))));
SELECT try(format('SELECT sync.file(%L, %L)', :R1, up(:R1, fate(0, 'applied', ''))));

-- Decided wishes are pruned once magic_sync.wishes_kept has passed, oldest
-- first, at most max a call; a pending one never, however old
SET ROLE wish_owner;
SELECT sync.wish('store_settings', :R1, '{"printer": "hall"}') > :w4 AS pending;
RESET ROLE;
SELECT fate, count(*) FROM sync.wishes GROUP BY 1 ORDER BY 1;
UPDATE sync.wish_list SET made = made - interval '30 days', decided = decided - interval '2 days';
SELECT wishes FROM sync.prune();
SET magic_sync.wishes_kept = '1d';
SELECT wishes FROM sync.prune(1);
SELECT wishes FROM sync.prune();
SELECT fate, count(*) FROM sync.wishes GROUP BY 1 ORDER BY 1;
RESET magic_sync.wishes_kept;
-- only a superuser (or the server's configuration) sets how long they are kept
SET ROLE wish_admin;
SELECT try('SET magic_sync.wishes_kept = ''1s''');
RESET ROLE;

-- A table declared again as a record is no setting: its wishes refused
SET ROLE wish_owner;
SELECT sync.mirror('store_settings', 'record', 'assigned(store)', origin => 'store');
SELECT try(format('SELECT sync.wish(%L, %L, %L)', 'store_settings', :R1, '{"printer": "x"}'));
RESET ROLE;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_wishes;
DROP ROLE wish_owner;
DROP ROLE wish_admin;
DROP ROLE wish_nobody;
DROP ROLE wish_replica;
