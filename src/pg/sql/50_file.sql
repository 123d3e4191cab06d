-- Filing what replicas say (src/pg/transport/file.c and its parts, file.h).

-- Edits a replica sent that the server did not take, its own copy winning,
-- for a reason the replica's application must fix: a record edited without
-- raising its version, an older version, a record kept as first filed
-- (src/pg/transport/filing.c).  Forgotten once that row is filed from it;
-- sync.health lists them.
-- The last send filed per replica and lane (src/pg/transport/answers.c):
-- a send numbered at or below it is a duplicate, however long after its
-- answer was pruned (docs/protocol.md 7.1); each lane numbers its sends on
-- its own (7.2), '' the first.
CREATE TABLE sync.sends (
	replica			uuid NOT NULL,
	filed_seq		bigint NOT NULL,
	filed_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	lane			text COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (replica, lane)
);
COMMENT ON TABLE sync.sends IS 'The last send number filed per replica and lane: one at or below it is a duplicate';
SELECT pg_catalog.pg_extension_config_dump('sync.sends', '');

-- Each replica's lanes as the server has filed them (docs/protocol.md 7.2):
-- the last send number filed of each, and its answers (sync.answers.lane).
CREATE VIEW sync.lanes AS
	SELECT s.replica, s.lane, s.filed_seq AS last_seq, s.filed_at,
		(SELECT pg_catalog.count(*) FROM sync.answers a
		  WHERE a.replica OPERATOR(pg_catalog.=) s.replica AND a.lane OPERATOR(pg_catalog.=) s.lane) AS answers,
		(SELECT pg_catalog.count(*) FROM sync.answers a
		  WHERE a.replica OPERATOR(pg_catalog.=) s.replica AND a.lane OPERATOR(pg_catalog.=) s.lane
		    AND a.pulled IS NULL) AS answers_unpulled,
		ARRAY(SELECT t.name FROM sync.tables t WHERE t.lane OPERATOR(pg_catalog.=) s.lane ORDER BY t.name) AS tables
	  FROM sync.sends s;
COMMENT ON VIEW sync.lanes IS 'Per replica and lane: the last send number filed (one at or below it is a duplicate), its answers kept and not yet pulled, and the tables declared in the lane';

CREATE TABLE sync.dropped (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	reason			text NOT NULL,
	at				timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (replica, tab, key)
);
COMMENT ON TABLE sync.dropped IS 'Edits replicas sent that the server did not take, for a reason the replica must fix, until the row is filed';
SELECT pg_catalog.pg_extension_config_dump('sync.dropped', '');

-- Rows taken back from a replica that a row it wrote before may still point
-- at (src/pg/transport/reach.c, docs/design.md 5.4): a held row the replica
-- acknowledged the taking of, kept while it has a write not filed from before
-- that message (Up.unfiled_since); forgotten once it has none.  A row it
-- files may point at these as at the rows it holds.
CREATE TABLE sync.let_go (
	replica			uuid NOT NULL REFERENCES sync.replicas ON DELETE CASCADE,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	taken			bigint NOT NULL,			-- the message that took it back
	PRIMARY KEY (replica, tab, key)
);
CREATE INDEX let_go_taken ON sync.let_go (replica, taken);
COMMENT ON TABLE sync.let_go IS 'Rows taken back from each replica that a row it wrote before, not filed yet, may still point at';
SELECT pg_catalog.pg_extension_config_dump('sync.let_go', '');

CREATE FUNCTION sync.file(replica uuid, upload bytea, sender jsonb DEFAULT NULL) RETURNS jsonb
	LANGUAGE c VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_file';
COMMENT ON FUNCTION sync.file(uuid, bytea, jsonb) IS
	'Files one upload of a replica in one transaction, whole or not at all (its length and check verified first), once (a send numbered at or below the last filed is a duplicate): its acknowledgement, refusals, rows, digests and backlog; queues its Filed answer for sync.pull; says what became of it';

CREATE FUNCTION sync.inbox_retry(max integer DEFAULT 100) RETURNS integer
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_inbox_retry';
COMMENT ON FUNCTION sync.inbox_retry(integer) IS
	'Files again up to max rows of the inbox whose backoff has passed; returns how many went through';
