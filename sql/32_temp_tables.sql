-- The relay's temporary tables are all created by a session's first pass: a
-- later pass runs no DDL (issue 14: no per-pass DDL), whatever it meets for
-- the first time -- a snapshot, a change, a schema change.  Each CREATE
-- writes the catalogs and runs the event triggers; before, each kind of
-- step created its tables the first time a pass took it, hours into a
-- worker's life.  In a database of its own, with an event trigger writing
-- down every DDL command the passes run.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_temp;
\c contrib_regression_temp
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 10) g;
SELECT count(*) FROM (SELECT sync.mirror('products', 'catalog', 'broadcast')) m;

CREATE TABLE ddl_seen (n serial, tag text, what text);
-- the relay runs with its search_path pinned: the function names its table
CREATE FUNCTION write_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.ddl_seen (tag, what)
	SELECT command_tag, object_identity FROM pg_event_trigger_ddl_commands();
END $$;
CREATE EVENT TRIGGER write_ddl ON ddl_command_end EXECUTE FUNCTION write_ddl();

-- the session's first pass, with nothing to send: every table, once
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS tables, count(DISTINCT what) AS distinct_tables FROM ddl_seen
 WHERE tag = 'CREATE TABLE' AND what LIKE 'pg_temp%';
SELECT count(*) AS temp_tables FROM pg_class WHERE relnamespace = pg_my_temp_schema() AND relkind = 'r';
TRUNCATE ddl_seen;

-- then passes of every kind: none creates a table
SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();
UPDATE products SET name = 'changed' WHERE id = 1;
SELECT provisioned FROM sync.relay_pass();
DELETE FROM products WHERE id = 2;
SELECT provisioned FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT provisioned FROM sync.relay_pass();
-- a schema change: the user's DDL is written down, the passes' is not
ALTER TABLE products ADD COLUMN price numeric;
SELECT provisioned FROM sync.relay_pass();
SELECT tag, what FROM ddl_seen ORDER BY n;
SELECT replica, count(*) AS held FROM sync.held GROUP BY replica ORDER BY replica;

-- temporary tables dropped under it: the next pass creates them again
DISCARD TEMP;
TRUNCATE ddl_seen;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS tables FROM ddl_seen WHERE tag = 'CREATE TABLE' AND what LIKE 'pg_temp%';
UPDATE products SET name = 'changed again' WHERE id = 1;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS tables FROM ddl_seen WHERE tag = 'CREATE TABLE' AND what LIKE 'pg_temp%';

-- A large pass's statistics of its temporary tables go when the next pass
-- empties them: they describe that pass's rows alone (here all of one
-- change), and planned every small pass after it by them (bench/refused.py:
-- one replica's 60,000 refused rows sent again made the others' one-row
-- changes a third dearer), until the next large pass.
INSERT INTO products (id, name) SELECT g, 'p' || g FROM generate_series(11, 1200) g;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) > 0 AS analysed FROM pg_statistic WHERE starelid = 'pg_temp.ms_send'::regclass;
UPDATE products SET name = 'one more' WHERE id = 1;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS statistics_left FROM pg_statistic
 WHERE starelid IN ('pg_temp.ms_send'::regclass, 'pg_temp.ms_take'::regclass);
SELECT count(*) AS tables FROM ddl_seen WHERE tag = 'CREATE TABLE' AND what LIKE 'pg_temp%';

DROP EVENT TRIGGER write_ddl;
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_temp;
