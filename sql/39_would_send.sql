-- sync.would_send: a dry run of one DML statement, planned by the relay's
-- own planner, rolled back; it says what a pass of that statement's notes
-- then sends and lets go of, exactly.
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE SCHEMA ws;
CREATE TABLE ws.projects (id int PRIMARY KEY, team uuid NOT NULL, name text);
CREATE TABLE ws.issues (id int PRIMARY KEY, project int NOT NULL REFERENCES ws.projects, title text);
CREATE TABLE ws.comments (id int PRIMARY KEY, issue int NOT NULL REFERENCES ws.issues, body text);
CREATE TABLE ws.labels (id int PRIMARY KEY, name text);
SELECT sync.mirror('ws.projects', 'catalog', 'assigned(team)');
SELECT sync.mirror('ws.issues', 'catalog', 'follows(project)');
SELECT sync.mirror('ws.comments', 'catalog', 'follows(issue)');
SELECT sync.mirror('ws.labels', 'catalog', 'broadcast');
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-00000000000a');
SELECT sync.replica_add('bbbbbbbb-0000-0000-0000-00000000000b');
INSERT INTO ws.projects VALUES (1, 'aaaaaaaa-0000-0000-0000-00000000000a', 'one'),
	(2, 'bbbbbbbb-0000-0000-0000-00000000000b', 'two');
INSERT INTO ws.issues VALUES (10, 1, 'a'), (11, 1, 'b'), (20, 2, 'c');
INSERT INTO ws.comments VALUES (100, 10, 'x'), (101, 10, 'y'), (102, 11, 'z'), (200, 20, 'w');
INSERT INTO ws.labels VALUES (1, 'bug'), (2, 'idea');
-- both provisioned: what they hold is the starting point
SELECT notes_read >= 0 AS ran, provisioned FROM sync.relay_pass();

-- what is there before: every dry run below leaves it as it is
CREATE TABLE ws_before AS
SELECT (SELECT count(*) FROM sync.notes WHERE NOT done) AS notes,
       (SELECT count(*) FROM sync.outbox) AS outbox,
       (SELECT count(*) FROM sync.held) AS held,
       (SELECT string_agg(format('%s:%s', id, project), ',' ORDER BY id) FROM ws.issues) AS issues,
       (SELECT string_agg(format('%s:%s', id, body), ',' ORDER BY id) FROM ws.comments) AS comments,
       (SELECT string_agg(name, ',' ORDER BY id) FROM ws.labels) AS labels,
       (SELECT last_value FROM sync.note_seq) AS note_seq;

-- the answer for this test's two replicas (an earlier test may leave others)
CREATE FUNCTION ws_send(s text) RETURNS TABLE (replica uuid, tab regclass, sent bigint, let_go bigint)
	LANGUAGE sql AS $$
	SELECT * FROM sync.would_send(s) w
	 WHERE w.replica IN ('aaaaaaaa-0000-0000-0000-00000000000a', 'bbbbbbbb-0000-0000-0000-00000000000b')
$$;

-- one row changed in place: the one replica holding it is sent it
SELECT * FROM ws_send($$UPDATE ws.issues SET title = 'A' WHERE id = 10$$);
-- an issue moving to the other team's project: its comments follow it
SELECT * FROM ws_send($$UPDATE ws.issues SET project = 2 WHERE id = 10$$);
-- a delete
SELECT * FROM ws_send($$DELETE FROM ws.comments WHERE id = 102$$);
-- a broadcast row, changed and made: every replica
SELECT * FROM ws_send($$UPDATE ws.labels SET name = 'defect' WHERE id = 1$$);
SELECT * FROM ws_send($$INSERT INTO ws.labels VALUES (3, 'docs')$$);
-- MERGE, and a statement that moves nothing
SELECT * FROM ws_send($$MERGE INTO ws.comments c USING (VALUES (200, 'v')) v(id, body) ON c.id = v.id
	WHEN MATCHED THEN UPDATE SET body = v.body$$);
SELECT count(*) FROM sync.would_send($$UPDATE ws.issues SET title = title WHERE id = 999$$);
-- for a program
SELECT jsonb_pretty(sync.would_send_json($$UPDATE ws.issues SET project = 2 WHERE id = 11$$));

-- nothing stayed: the tables, the notes, the outbox, what is held
SELECT (SELECT count(*) FROM sync.notes WHERE NOT done) = b.notes AS no_notes,
       (SELECT count(*) FROM sync.outbox) = b.outbox AS no_outbox,
       (SELECT count(*) FROM sync.held) = b.held AS same_held,
       (SELECT string_agg(format('%s:%s', id, project), ',' ORDER BY id) FROM ws.issues) = b.issues AS issues,
       (SELECT string_agg(format('%s:%s', id, body), ',' ORDER BY id) FROM ws.comments) = b.comments AS comments,
       (SELECT string_agg(name, ',' ORDER BY id) FROM ws.labels) = b.labels AS labels,
       (SELECT last_value FROM sync.note_seq) > b.note_seq AS note_ids_drawn
  FROM ws_before b;
-- and a pass finds nothing to do
SELECT notes_read, rows_sent, rows_taken, messages FROM sync.relay_pass();

-- what it said is what a pass then does: the move, run for real
CREATE TABLE ws_said AS
SELECT sum(sent) AS sent, sum(let_go) AS let_go
  FROM sync.would_send($$UPDATE ws.issues SET project = 2 WHERE id = 10$$);
UPDATE ws.issues SET project = 2 WHERE id = 10;
SELECT p.rows_sent = s.sent AS sent_as_said, p.rows_taken = s.let_go AS let_go_as_said, s.sent, s.let_go
  FROM sync.relay_pass() p, ws_said s;

-- in a transaction of the caller's, whose own earlier writes are not the statement's
BEGIN;
UPDATE ws.labels SET name = 'thought' WHERE id = 2;
SELECT * FROM ws_send($$DELETE FROM ws.comments WHERE id = 200$$);
SELECT name FROM ws.labels WHERE id = 2;
ROLLBACK;

-- refused: anything but one INSERT, UPDATE, DELETE or MERGE, with why
CREATE FUNCTION ws_try(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text; h text;
BEGIN
	PERFORM * FROM sync.would_send(s);
	RETURN 'ran';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
	RETURN format('%s: %s | %s | %s', SQLSTATE, SQLERRM, d, h);
END $$;
SELECT ws_try('SELECT 1');
SELECT ws_try('TRUNCATE ws.labels');
SELECT ws_try('DROP TABLE ws.labels');
SELECT ws_try($$DELETE FROM ws.labels; DELETE FROM ws.comments$$);
SELECT ws_try('');
SELECT ws_try('UPDATE ws.nosuch SET x = 1');
-- an error in the statement rolls back what it did before, and only that
SELECT ws_try($$UPDATE ws.labels SET name = 'gone' WHERE id = 1 RETURNING 1/0$$);
SELECT name FROM ws.labels WHERE id = 1;
SELECT count(*) AS notes FROM sync.notes WHERE NOT done;

-- run as the caller: sync_admin's, not PUBLIC's; not past the caller's rights on the table
CREATE ROLE ws_admin LOGIN PASSWORD 'x' IN ROLE sync_admin;
CREATE ROLE ws_nobody LOGIN PASSWORD 'x';
GRANT USAGE ON SCHEMA ws TO ws_admin, ws_nobody;
GRANT SELECT ON ALL TABLES IN SCHEMA ws TO ws_admin;
-- (it reads every mirrored table, as sync.why does: those an earlier test left too)
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables LOOP
		EXECUTE format('GRANT SELECT ON %s TO ws_admin', r);
	END LOOP;
END
$$;
SET ROLE ws_nobody;
SELECT ws_try($$UPDATE ws.issues SET title = 'A' WHERE id = 11$$);
RESET ROLE;
SET ROLE ws_admin;
SELECT ws_try($$UPDATE ws.issues SET title = 'A' WHERE id = 11$$);
RESET ROLE;
GRANT UPDATE ON ws.issues TO ws_admin;
-- (in a new session: the plan's temporary tables are the first caller's)
\c -
SET client_min_messages = warning;
SET ROLE ws_admin;
SELECT * FROM ws_send($$UPDATE ws.issues SET title = 'A' WHERE id = 11$$);
-- the statement is security-restricted: it cannot change the session for what runs after it
SELECT ws_try($$UPDATE ws.issues SET title = (SELECT set_config('role', 'ws_nobody', false)) WHERE id = 11$$);
RESET ROLE;
SELECT p.proname, p.prosecdef, p.proconfig FROM pg_proc p
 WHERE p.pronamespace = 'sync'::regnamespace AND p.proname LIKE 'would_send%' ORDER BY 1;

-- leave nothing behind for the next test
DROP FUNCTION ws_try(text);
DROP FUNCTION ws_send(text);
DROP TABLE ws_before, ws_said;
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables LOOP
		EXECUTE format('REVOKE ALL ON %s FROM ws_admin', r);
	END LOOP;
END
$$;
REVOKE USAGE ON SCHEMA ws FROM ws_admin, ws_nobody;
DROP ROLE ws_admin;
DROP ROLE ws_nobody;
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables WHERE relid::text LIKE 'ws.%' ORDER BY id DESC LOOP
		PERFORM sync.unmirror(r);
	END LOOP;
END
$$;
SELECT sync.replica_drop('aaaaaaaa-0000-0000-0000-00000000000a');
SELECT sync.replica_drop('bbbbbbbb-0000-0000-0000-00000000000b');
SELECT forgotten AS forgotten FROM sync.relay_pass();
DROP SCHEMA ws CASCADE;
TRUNCATE sync.notes, sync.quarantine, sync.bodies CASCADE;
