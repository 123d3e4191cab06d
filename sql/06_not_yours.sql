-- Which uuids are registered is no role's to find out by asking (issue 38):
-- sync.pull, sync.file and sync.settled, callable by anyone, answer a role
-- that may not act for the uuid the same whether it is another replica's,
-- a dropped one's or never registered.  Only the replica's own role and
-- sync_admin are told that it is unknown or dropped.  In a database of its own.
SET client_min_messages = warning;
CREATE ROLE regress_nobody LOGIN PASSWORD 'nobody-secret';
CREATE ROLE regress_store LOGIN PASSWORD 'store-secret';
CREATE DATABASE contrib_regression_not_yours;
\c contrib_regression_not_yours
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;
-- another's, dropped, never registered
SELECT sync.replica_add('6b6b6b6b-0000-4000-8000-000000000001', role => 'regress_store');
SELECT sync.replica_add('6b6b6b6b-0000-4000-8000-000000000002', role => 'regress_store');
SELECT sync.replica_drop('6b6b6b6b-0000-4000-8000-000000000002');
\set theirs '''6b6b6b6b-0000-4000-8000-000000000001'''
\set dropped '''6b6b6b6b-0000-4000-8000-000000000002'''
\set unknown '''6b6b6b6b-0000-4000-8000-000000000003'''

-- A login role with no replica: one answer for all three, but the uuid it gave
SET ROLE regress_nobody;
SELECT * FROM sync.pull(:theirs, 0);
SELECT * FROM sync.pull(:dropped, 0);
SELECT * FROM sync.pull(:unknown, 0);
SELECT * FROM sync.pull(:unknown, 0, 1048576, '\x');
SELECT sync.file(:theirs, '\x');
SELECT sync.file(:dropped, '\x');
SELECT sync.file(:unknown, '\x');
SELECT sync.settled(:theirs, pg_current_snapshot());
SELECT sync.settled(:unknown, pg_current_snapshot());
-- the same, told apart by SQLSTATE, message and detail alike: one answer each
DO $$
DECLARE
	u uuid;
	answers text[] := '{}';
	state text;
	msg text;
	detail text;
BEGIN
	FOREACH u IN ARRAY ARRAY['6b6b6b6b-0000-4000-8000-000000000001', '6b6b6b6b-0000-4000-8000-000000000002',
	                         '6b6b6b6b-0000-4000-8000-000000000003']::uuid[] LOOP
		BEGIN
			PERFORM * FROM sync.pull(u, 0);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
			answers := answers || (state || ' ' || replace(msg, u::text, '<uuid>') || ' ' || detail);
		END;
	END LOOP;
	RAISE WARNING 'distinct answers: %', (SELECT count(DISTINCT a) FROM unnest(answers) a);
END $$;

-- The replica's own role is told that its replica was dropped; sync_admin
-- that a uuid is not registered
SET ROLE regress_store;
SELECT * FROM sync.pull(:dropped, 0);
SELECT * FROM sync.pull(:unknown, 0);
RESET ROLE;
SELECT * FROM sync.pull(:unknown, 0);
SELECT * FROM sync.pull(:dropped, 0);

\c contrib_regression
DROP DATABASE contrib_regression_not_yours;
DROP ROLE regress_nobody, regress_store;
