-- The catalog: what the engine records.  Every table is registered with
-- pg_extension_config_dump, so pg_dump keeps it with the data it describes
-- (a restored database must know what its replicas held: docs/design.md 4.8).

-- Declarations (src/pg/declare/declare.c).  One row per mirrored table.
CREATE TABLE sync.tables (
	id				int PRIMARY KEY,
	relid			regclass NOT NULL UNIQUE,
	name			text NOT NULL UNIQUE,		-- wire name: relname, or schema.relname outside public
	mirror			text NOT NULL CHECK (mirror IN ('catalog', 'record', 'setting')),
	rule			text CHECK (rule IN ('broadcast', 'assigned', 'grouped', 'follows')),
												-- NULL: referenced only (travels as a parent)
	rule_column		name,						-- assigned(col), follows(col)
	members			regclass,					-- grouped: the member table (FK to this table)
	member_key		name[],						-- grouped: the member table's columns pointing here
	assignments		regclass,					-- grouped: the table giving groups to replicas
	assignment_replica name,					-- grouped: its uuid replica column
	group_column	name,						-- grouped: the column members and assignments share
	key				name[] NOT NULL,
	origin			name,
	version			name,
	replica_owned	name[] NOT NULL DEFAULT '{}',
	unmirrored		name[] NOT NULL DEFAULT '{}',
	retired			name,						-- the replica-side column set when a row is retired
	created			name,
	generated		name[] NOT NULL DEFAULT '{}',
	active			regclass,					-- a view: rows outside it are not wanted
	partition		name,						-- the column naming the row's partition
	codec			text NOT NULL DEFAULT 'json' CHECK (codec IN ('json', 'proto')),
	sender			name,						-- a jsonb column stamped with sync.file's sender
	fields			jsonb NOT NULL DEFAULT '{}',	-- proto codec: column -> field number, fixed for good
	columns			jsonb NOT NULL DEFAULT '{}',	-- mirrored column -> its type when declared (sync.check)
	foreign_keys	jsonb NOT NULL DEFAULT '{}',	-- FK constraint -> the mirrored table it points at, when declared
	declared		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- What schema changes follow the table by (src/pg/declare/follow.c):
	ids				jsonb NOT NULL DEFAULT '{}',	-- mirrored column -> its id, given once, never reused: replicas match columns by it
	attnums			jsonb NOT NULL DEFAULT '{}',	-- every column of the table -> its attnum: a rename is followed by it
	fills			jsonb NOT NULL DEFAULT '{}',	-- column added since -> the value (text) every row then held took
	last_id			int NOT NULL DEFAULT 0,			-- the highest column id given
	hlc				boolean NOT NULL DEFAULT false,	-- version => 'hlc': replicas stamp the version with their clock
	-- the lane the replicas upload its rows in (docs/protocol.md 7.2): '' the first
	lane			text COLLATE "C" NOT NULL DEFAULT '' CHECK (lane ~ '^([a-z][a-z0-9_]{0,62})?$')
);
CREATE SEQUENCE sync.tables_id_seq AS int OWNED BY sync.tables.id;
ALTER TABLE sync.tables ALTER COLUMN id SET DEFAULT pg_catalog.nextval('sync.tables_id_seq'::pg_catalog.regclass);
COMMENT ON TABLE sync.tables IS 'Mirrored tables, as sync.mirror declared them';

-- Replicas (src/pg/replicas.c).  seen_* is what the last relay pass saw
-- (observe, docs/design.md 4.2); last_* the chain of messages written for it;
-- acked_* what it last said it applied.
CREATE TABLE sync.replicas (
	id				uuid PRIMARY KEY,
	partition		text,
	role			name,						-- the role it authenticates as
	live			boolean NOT NULL DEFAULT true,
	dropped			boolean NOT NULL DEFAULT false,	-- sync.replica_drop: forgotten at the next pass
	added			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	seen_live		boolean NOT NULL DEFAULT false,
	seen_partition	text,
	provision		boolean NOT NULL DEFAULT true,	-- provision from scratch at the next pass
	last_number		bigint NOT NULL DEFAULT 0,
	last_nonce		bytea,
	snapshot_number	bigint,						-- first message of its latest snapshot
	snapshot_end	bigint,						-- the EndSnapshot of its latest snapshot
	schema_hash		bytea,						-- SHA-256 of the schema its latest snapshot carried
	acked_epoch		bytea,
	acked_number	bigint NOT NULL DEFAULT 0,
	acked_nonce		bytea,
	acked_at		timestamptz,
	heard_at		timestamptz,				-- its last filing
	gap				bigint,						-- the newest message it said it could not follow
	backlog			jsonb,						-- what it last said it has not sent or filed
	digests_at		timestamptz,				-- when its digests last matched
	last_error		text,
	last_error_at	timestamptz,
	provision_failed_at timestamptz			-- its snapshot failed for good (src/pg/relay/park.c): tried again a minute later
);
COMMENT ON TABLE sync.replicas IS 'The replicas, what the relay last saw of them, and what they acknowledged';
-- (and the build each runs: added by 70_builds.sql, after the views of 60_read.sql)

-- Epochs (src/pg/epoch.c): a random id of the installation and the secret
-- that seals its messages.  Created by the first relay pass, not by CREATE
-- EXTENSION, so that a restored dump brings back its own epoch.
CREATE TABLE sync.epoch (
	id				bytea PRIMARY KEY CHECK (octet_length(id) = 16),
	secret			bytea NOT NULL CHECK (octet_length(secret) = 32),
	started			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	reason			text NOT NULL,
	ended			timestamptz
);
CREATE UNIQUE INDEX epoch_current ON sync.epoch ((true)) WHERE ended IS NULL;
COMMENT ON TABLE sync.epoch IS 'Epochs: the current one has no end; a new epoch provisions every replica';

-- Notes (src/pg/notes.c): written by the noting trigger in the writer's
-- transaction, one per changed row.  Numbered by a sequence, not by xid, so
-- a dumped and restored database keeps the order.
CREATE SEQUENCE sync.note_seq;
CREATE TABLE sync.notes (
	id				bigint NOT NULL DEFAULT pg_catalog.nextval('sync.note_seq'::pg_catalog.regclass),
	tab				int NOT NULL,				-- sync.tables.id (for a group table: the grouped table)
	source			"char" NOT NULL DEFAULT 'r',	-- r: the row; m: a group member; a: a group assignment
	key				text COLLATE "C",			-- the row's canonical key (m: the grouped row's; a: NULL)
	part			text,						-- the row's partition
	old_key			text COLLATE "C",			-- the key before the change, when it changed
	old_part		text,						-- the partition it left, when it moved
	pointed			jsonb,						-- FK constraint name -> its columns (the parent's key first) as a canonical key, before the change
	replica			uuid,						-- a: the replica given or taken the group
	grp				text,						-- m, a: the group
	xid				xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
	build			smallint NOT NULL DEFAULT 1,	-- a later build's note is skipped, never misread
	done			boolean NOT NULL DEFAULT false,
	parked			text,						-- planning it failed for good: why (src/pg/park.c)
	parked_at		timestamptz,				-- since when: read again a minute later
	noted			timestamptz NOT NULL DEFAULT pg_catalog.now()	-- when the noting transaction began (src/pg/read.c: pending since)
);
-- The noting trigger writes a note in every writing transaction: one index
-- to maintain, not three.  Ids come from a sequence (unique without an index);
-- the relay reads the pending ones and deletes those it planned in the pass;
-- notes marked done otherwise (an unmirrored table's) are pruned.
CREATE INDEX notes_pending ON sync.notes (id) WHERE NOT done;
CREATE INDEX notes_done ON sync.notes (id) WHERE done;
CREATE INDEX notes_parked ON sync.notes (id) WHERE parked IS NOT NULL AND NOT done;
COMMENT ON TABLE sync.notes IS 'One note per change of a mirrored row, written in the changing transaction';

-- Messages (src/pg/record.c, pull.c).  A body is stored once however many
-- replicas' messages carry it; each message is the replica's head || body.
CREATE SEQUENCE sync.message_seq;
CREATE TABLE sync.bodies (
	id				bigserial PRIMARY KEY,
	hash			bytea NOT NULL UNIQUE,		-- SHA-256 of bytes
	bytes			bytea NOT NULL,
	upserts			int NOT NULL DEFAULT 0,
	deletes			int NOT NULL DEFAULT 0
);
ALTER TABLE sync.bodies ALTER COLUMN bytes SET STORAGE EXTERNAL;	-- already compact; no recompression
COMMENT ON TABLE sync.bodies IS 'Message bodies, each stored once however many replicas'' messages carry it (by its SHA-256)';
CREATE TABLE sync.outbox (
	replica			uuid NOT NULL,
	number			bigint NOT NULL,
	epoch			bytea NOT NULL,
	nonce			bytea NOT NULL,
	head			bytea NOT NULL,
	body			bigint REFERENCES sync.bodies,	-- NULL once dropped
	bytes			int NOT NULL,
	snapshot		boolean NOT NULL DEFAULT false,	-- begins a snapshot
	dropped			boolean NOT NULL DEFAULT false,	-- replaced by a snapshot: never pulled, still known
	written			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	pulls			int NOT NULL DEFAULT 0,		-- times sync.pull returned it: past one, it went out and was not applied
	PRIMARY KEY (replica, number)
);
CREATE INDEX outbox_body ON sync.outbox (body);
COMMENT ON TABLE sync.outbox IS 'Messages recorded for each replica, kept until it acknowledges them';

-- What each replica holds (src/pg/relay/record.c, transport/ack.c, filing.c):
-- a row counts as held once the replica acknowledged the message that
-- carried it (number <= replicas.acked_number); number 0 is a row the
-- replica filed itself.
CREATE TABLE sync.held (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	note			bigint NOT NULL DEFAULT 0,	-- newest note of the row the plan saw
	number			bigint NOT NULL,			-- the message that carried this version
	taken			bigint,						-- the message that takes it back, while letting go
	refused			text,						-- the replica could not take it: why
	since			bigint NOT NULL DEFAULT 0,	-- the message that brought this row to it since it last let it go
	replace			boolean NOT NULL DEFAULT false,	-- an edit of the replica's was dropped: the next send replaces its copy whole
	PRIMARY KEY (replica, tab, key)
) WITH (fillfactor = 85);
-- A row sent again changes only note, number and since, none of them
-- indexed: the update is HOT (no index touched, the old version pruned on
-- its page), in the room fillfactor leaves on each page.
-- A pass looks up the replicas holding the rows a change moves by held_row
-- (the rows in question, docs/design.md 4.4): what it touches follows what
-- changed, not what the replicas hold.  The replica comes last: a lookup of
-- one replica's held row (replica, tab, key) is one descent whichever of
-- held_pkey and held_row the planner takes, as it costs them alike; by
-- (tab, key) alone it read the heap row of every replica holding a
-- broadcast row to keep one (bench/profile.py --kind assigned at 10^6).
CREATE INDEX held_row ON sync.held (tab, key, replica);
-- The reads (src/pg/read.c) never count every held row: whether a replica
-- has rows of a table on their way, and how many, is read of sync.carried
-- (below); the rows letting go or refused, few and short-lived, have partial
-- indexes of their own.  Filing an acknowledgement deletes the rows taken
-- through it by held_taken, not by a scan.  A lookup of one refused row
-- (relay/retry.c) is one descent of held_refused too: by (replica, tab)
-- alone it read every row the replica refused, once per row due.
CREATE INDEX held_taken ON sync.held (replica, tab, taken) WHERE taken IS NOT NULL;
CREATE INDEX held_refused ON sync.held (replica, tab, key) WHERE refused IS NOT NULL;
-- rows whose next send replaces the replica's copy: few, looked up by every
-- pass, and by a pass sending a table's rows again (a schema change's)
CREATE INDEX held_replace ON sync.held (replica, tab, key) WHERE replace;
COMMENT ON TABLE sync.held IS 'What the engine records each replica holds';

-- What each message carries, per table (src/pg/relay/record.c): the rows of
-- the table it upserts, written with the held rows it sets.  A replica has
-- rows of a table on their way while a message after acked_number carries
-- some: one probe of the primary key, and their count a sum over the
-- messages it has not acknowledged (a row sent twice meanwhile counts
-- twice), with no index on sync.held.number, so that sending a row again is
-- a HOT update.  Rows at or below acked_number are deleted by the next pass
-- writing to the replica.
CREATE TABLE sync.carried (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	number			bigint NOT NULL,			-- the message
	rows			bigint NOT NULL,			-- rows of tab it upserts
	PRIMARY KEY (replica, tab, number)
);
COMMENT ON TABLE sync.carried IS 'The rows of each table each message upserts, until the replica acknowledges it';

-- Rows a replica refused, tried again (src/pg/relay/retry.c,
-- transport/refused.c): one row per refused held row, kept apart from the
-- held set so that no pass or acknowledgement pays for it.  A row refused is
-- sent again to that replica alone, rebuilt from the current row, when due:
-- a minute after the refusal, the wait doubling with each refusal of the
-- same version up to an hour, and at once when the replica reports a new
-- build or protocol.  A change of the row on the server sends it at once, as
-- to every holder, and starts the count again; the replica taking it ends it.
CREATE TABLE sync.refused_rows (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	note			bigint NOT NULL,			-- the version refused (sync.held.note then)
	times			int NOT NULL DEFAULT 1,		-- how often in a row this version was refused
	refused_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),	-- the last refusal
	due				timestamptz,				-- when it is sent again; NULL: sent, its answer awaited
	PRIMARY KEY (replica, tab, key)
);
CREATE INDEX refused_rows_due ON sync.refused_rows (replica, due) WHERE due IS NOT NULL;
COMMENT ON TABLE sync.refused_rows IS 'Rows a replica refused: how often, and when each is sent to it again';
-- When each replica's first refused row is due, or sooner (never later):
-- what every pass reads to know whether any is due (relay/retry.c), kept
-- apart so that no pass reads sync.refused_rows for it.  That table's due
-- index fills with the entries of rows sent again or refused again (every
-- change of due is a new one), which a probe of the earliest walked until
-- vacuum: a replica refusing 60,000 rows again and again made every other
-- replica's pass read them.  One row per replica, updated in place; kept by
-- the statement triggers below whatever writes sync.refused_rows (a
-- restore's too: it is not dumped), and made exact again by the pass that
-- sends that replica its rows.
CREATE TABLE sync.refused_due (
	replica			uuid PRIMARY KEY,
	due				timestamptz NOT NULL		-- at or before its first refused row due
);
COMMENT ON TABLE sync.refused_due IS 'When each replica''s first refused row is due, or sooner: what a pass reads to know whether any is';
CREATE FUNCTION sync.refused_due_keep() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	INSERT INTO sync.refused_due AS d (replica, due)
	SELECT c.replica, min(c.due) FROM changed c WHERE c.due IS NOT NULL GROUP BY c.replica
	ON CONFLICT (replica) DO UPDATE SET due = EXCLUDED.due WHERE EXCLUDED.due < d.due;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sync.refused_due_keep() IS 'Keeps sync.refused_due no later than the rows written to sync.refused_rows';
-- (a trigger with a transition table has one event)
CREATE TRIGGER refused_due_inserted AFTER INSERT ON sync.refused_rows
	REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sync.refused_due_keep();
CREATE TRIGGER refused_due_updated AFTER UPDATE ON sync.refused_rows
	REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sync.refused_due_keep();
-- under session_replication_role = replica too (a restore, a logical replica's apply)
ALTER TABLE sync.refused_rows ENABLE ALWAYS TRIGGER refused_due_inserted;
ALTER TABLE sync.refused_rows ENABLE ALWAYS TRIGGER refused_due_updated;

-- The schema of each mirrored table as each replica was last sent it
-- (src/pg/relay/evolve.c): by its snapshot, or by a schema change since.  A
-- table whose Table now hashes otherwise goes to the replica as a schema
-- change; a row of a table no longer declared, as a table to let go of.
CREATE TABLE sync.replica_tables (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	name			text NOT NULL,				-- the wire name it knows the table by
	was				text,						-- the name it knew before, when the last change renamed it
	hash			bytea,						-- SHA-256 of the Table sent; NULL: sent by a 0.1 snapshot
	number			bigint NOT NULL,			-- the message that carried it
	values_repaired	timestamptz,				-- when a values digest last started a repair (transport/values.c)
	keys_repaired	timestamptz,				-- when a key digest that ranges could not narrow was answered with a snapshot (transport/ack.c)
	PRIMARY KEY (replica, tab)
);
COMMENT ON TABLE sync.replica_tables IS 'The schema of each mirrored table as each replica was last sent it';

-- Answers to uploads (src/pg/transport/answers.c): a Filed message per send, queued
-- after the filing committed and returned by sync.pull before the outbox,
-- again a minute after it was last pulled, until the replica's filings show
-- it was received (transport/ack.c); pruned an hour after it was pulled.
CREATE TABLE sync.answers (
	replica			uuid NOT NULL,
	send_id			bytea NOT NULL,
	message			bytea NOT NULL,
	filed			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	pulled			timestamptz,
	received		timestamptz,				-- a filing of the replica showed it no longer waits for it
	PRIMARY KEY (replica, send_id),
	lane			text COLLATE "C" NOT NULL DEFAULT ''	-- the lane of the send answered ('' the first)
);
-- pruned an hour after they were pulled, oldest first (sync.prune)
CREATE INDEX answers_pulled ON sync.answers (pulled) WHERE pulled IS NOT NULL;
COMMENT ON TABLE sync.answers IS 'The answer (a Filed message) to each upload filed, returned by sync.pull before the outbox; kept an hour after it was pulled, for a send that comes again';

-- Uploaded rows set aside (src/pg/transport/inbox.c): they failed for good; retried
-- after a fix.
CREATE TABLE sync.inbox (
	id				bigserial PRIMARY KEY,
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	row				bytea,						-- the row as uploaded; NULL for a delete
	sender			jsonb,
	reason			text NOT NULL,
	sqlstate		text,
	tries			int NOT NULL DEFAULT 1,
	first_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_at			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (replica, tab, key)
);
COMMENT ON TABLE sync.inbox IS 'Uploaded rows set aside: they failed for good (a SQLSTATE: filed again by sync.inbox_retry after a fix) or wait until the replica holds the row again (none)';

-- Rows that cannot go (src/pg/load.c): they do not encode, or no message
-- could carry them.  Planned around until a fix lets them through.
CREATE TABLE sync.quarantine (
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	note			bigint NOT NULL DEFAULT 0,	-- newest note when set aside: a later one retries it
	reason			text NOT NULL,
	sqlstate		text,
	since			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (tab, key)
);
COMMENT ON TABLE sync.quarantine IS 'Rows that cannot go to replicas (they do not encode, or no message can carry them): planned around, tried again a minute later, when they change, or on sync.quarantine_retry';

-- Generations (src/pg/epoch.c): the server's lineage.  Every message carries
-- the generation it was written in; a replica never applies one of a
-- generation older than it follows.  Raised with each new epoch, and by a
-- relay pass that finds the server's history changed under its record:
-- another timeline (a standby promoted), cluster or database (a copy
-- restored).  Dumped with the record, so a restored copy sees it moved.
CREATE TABLE sync.generations (
	generation		bigint PRIMARY KEY,			-- when it began, in microseconds since 2000, or one more than the last
	epoch			bytea NOT NULL,				-- the epoch it began in
	timeline		int NOT NULL,				-- the server's timeline then
	system			text NOT NULL,				-- the cluster's system identifier then
	database		oid NOT NULL,				-- the database's oid then
	began			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	reason			text NOT NULL
);
COMMENT ON TABLE sync.generations IS 'Generations: the server''s lineage, raised with each epoch and when its timeline, cluster or database changed; messages carry the newest';

-- Claims refused (src/pg/transport/claim.c): what a replica said of itself
-- that the server would not believe (a number beyond its record without a
-- seal that verifies, a seal it never made, a generation newer than its
-- own).  Written out of the refused call's transaction (alarm.c), one row per
-- replica, the last; sync.health lists those of the last hour.  Not dumped:
-- an alarm, not a record.
CREATE TABLE sync.refused_claims (
	replica			uuid PRIMARY KEY,
	claim			text NOT NULL,				-- what was claimed, and through which call
	reason			text NOT NULL,
	sqlstate		text NOT NULL,
	at				timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sync.refused_claims IS 'The last claim of each replica the server refused, and why';

SELECT pg_catalog.pg_extension_config_dump('sync.tables', '');
SELECT pg_catalog.pg_extension_config_dump('sync.tables_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replicas', '');
SELECT pg_catalog.pg_extension_config_dump('sync.epoch', '');
SELECT pg_catalog.pg_extension_config_dump('sync.note_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sync.notes', '');
SELECT pg_catalog.pg_extension_config_dump('sync.message_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sync.bodies', '');
SELECT pg_catalog.pg_extension_config_dump('sync.bodies_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sync.outbox', '');
SELECT pg_catalog.pg_extension_config_dump('sync.held', '');
SELECT pg_catalog.pg_extension_config_dump('sync.carried', '');
SELECT pg_catalog.pg_extension_config_dump('sync.refused_rows', '');
SELECT pg_catalog.pg_extension_config_dump('sync.answers', '');
SELECT pg_catalog.pg_extension_config_dump('sync.inbox', '');
SELECT pg_catalog.pg_extension_config_dump('sync.inbox_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sync.quarantine', '');
SELECT pg_catalog.pg_extension_config_dump('sync.generations', '');
SELECT pg_catalog.pg_extension_config_dump('sync.replica_tables', '');

