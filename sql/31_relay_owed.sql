-- What each replica is owed (src/pg/sql/76_owed.sql): the messages beyond its
-- latest snapshot it has not acknowledged, and their bytes, kept as the relay
-- writes and the replica acknowledges, so that checking a pass's outboxes
-- against magic_sync.outbox_messages and outbox_bytes costs a look at each
-- replica's row, not a count of its outbox.  In a database of its own, so
-- that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_owed;
\c contrib_regression_owed
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price int NOT NULL DEFAULT 0);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products VALUES (1, 'tea'), (2, 'coffee'), (3, 'cocoa');

CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- sync.file of an Up acknowledging message n of replica r (its last when NULL)
CREATE FUNCTION t.ack(r uuid, n bigint DEFAULT NULL) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	o record;
BEGIN
	SELECT * INTO STRICT o FROM sync.outbox
	 WHERE replica = r AND number = coalesce(n, (SELECT last_number FROM sync.replicas WHERE id = r));
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'))
	     || wire.pb_bytes(4, wire.pb_bytes(1, o.epoch) || wire.pb_int(2, o.number)
	                        || wire.pb_bytes(3, o.nonce) || wire.pb_bytes(4, wire.seal(o.head)))
	     || wire.pb_int(11, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	RETURN sync.file(r, wire.framed(m)) IS NOT NULL;
END $$;
-- each replica: what it is owed, and whether that is what its outbox holds
-- beyond its latest snapshot, not dropped
CREATE FUNCTION t.owed() RETURNS TABLE (replica uuid, messages bigint, exact boolean) LANGUAGE sql AS $$
	SELECT r.id, r.owed_messages,
	       r.owed_messages = coalesce(o.n, 0) AND r.owed_bytes = coalesce(o.b, 0)
	  FROM sync.replicas r
	  LEFT JOIN (SELECT o.replica, count(*) AS n, sum(o.bytes) AS b FROM sync.outbox o
	               JOIN sync.replicas x ON x.id = o.replica
	              WHERE NOT o.dropped AND o.number > coalesce(x.snapshot_end, 0) GROUP BY o.replica) o
	    ON o.replica = r.id
	 ORDER BY r.id
$$;
CREATE FUNCTION t.change(id bigint) RETURNS void LANGUAGE sql AS $$
	UPDATE products SET price = price + 1 WHERE products.id = change.id
$$;

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
-- provisioned: a snapshot owes nothing beyond itself
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM t.owed();
SELECT t.ack('00000000-0000-0000-0000-000000000001');
SELECT * FROM t.owed();

-- three passes: three messages owed to each
SELECT t.change(1);
SELECT messages FROM sync.relay_pass();
SELECT t.change(2);
SELECT messages FROM sync.relay_pass();
SELECT t.change(3);
SELECT messages FROM sync.relay_pass();
SELECT * FROM t.owed();
-- the first acknowledges the second of them, the second its snapshot and
-- all three (an acknowledgement of the snapshot's messages takes off nothing)
SELECT t.ack('00000000-0000-0000-0000-000000000001',
	(SELECT number FROM sync.outbox WHERE replica = '00000000-0000-0000-0000-000000000001' ORDER BY number DESC OFFSET 1 LIMIT 1));
SELECT t.ack('00000000-0000-0000-0000-000000000002',
	(SELECT snapshot_end FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002'));
SELECT * FROM t.owed();
SELECT t.ack('00000000-0000-0000-0000-000000000002');
SELECT * FROM t.owed();
-- the same acknowledgement again takes off nothing more
SELECT t.ack('00000000-0000-0000-0000-000000000001',
	(SELECT min(number) FROM sync.outbox WHERE replica = '00000000-0000-0000-0000-000000000001'));
SELECT * FROM t.owed();

-- provisioned again: what it was owed is dropped, and owed no more
UPDATE sync.replicas SET provision = true WHERE id = '00000000-0000-0000-0000-000000000001';
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM t.owed();
SELECT t.change(1);
SELECT messages FROM sync.relay_pass();
SELECT * FROM t.owed();
SELECT t.ack('00000000-0000-0000-0000-000000000001');
SELECT t.ack('00000000-0000-0000-0000-000000000002');
SELECT * FROM t.owed();

-- Message numbers are drawn for every replica from one sequence: in a fleet,
-- each pass moves them on by as many as the replicas it writes to.  A pass
-- that writes to replicas within their bounds counts no outbox (before, a
-- replica whose numbers had moved on by more than 1,024 since it last
-- acknowledged had its outbox counted at every pass).
SELECT setval('sync.message_seq', nextval('sync.message_seq') + 1000000) > 0 AS moved_on;
SELECT t.change(2);
SELECT messages FROM sync.relay_pass();
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT seq_scan + idx_scan AS before FROM pg_stat_xact_user_tables WHERE relid = 'sync.outbox'::regclass \gset
SELECT t.change(3);
SELECT messages FROM sync.relay_pass();
SELECT seq_scan + idx_scan - :before AS outbox_read FROM pg_stat_xact_user_tables WHERE relid = 'sync.outbox'::regclass;
COMMIT;
SELECT * FROM t.owed();

-- past its bounds, a replica is provisioned again, the alarm saying what its
-- outbox holds; the replica that keeps up is not
SET magic_sync.outbox_messages = 3;
SELECT t.ack('00000000-0000-0000-0000-000000000001');
SELECT t.change(1);
SELECT messages FROM sync.relay_pass();
SELECT id, provision, split_part(last_error, ',', 1) AS alarm FROM sync.replicas ORDER BY id;
SELECT t.ack('00000000-0000-0000-0000-000000000001');
SELECT t.change(2);
SELECT messages FROM sync.relay_pass();
SELECT id, provision, split_part(last_error, ',', 1) AS alarm FROM sync.replicas ORDER BY id;
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM t.owed();
-- what is owed only says when to count: a figure too high (none of the
-- relay's own) provisions nobody whose outbox is within its bounds
UPDATE sync.replicas SET owed_messages = 1000, last_error = NULL;
SELECT t.change(3);
SELECT messages FROM sync.relay_pass();
SELECT id, provision, split_part(last_error, ',', 1) AS alarm FROM sync.replicas ORDER BY id;
RESET magic_sync.outbox_messages;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_owed;
