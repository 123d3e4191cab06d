-- Settings and wishes (src/pg/relay/wish.c, wish_send.c, src/pg/transport/wish_fates.c).  A
-- setting table (sync.mirror(..., 'setting', origin => col)) is a record of
-- one row per replica, keyed by its origin alone, that the replica writes;
-- the server may wish one replica's row changed.  A wish is kept here: the
-- relay sends it down once (number: the message that carried it), the
-- replica applies it or keeps its own row, and says so in an upload; a newer
-- wish for the same row supersedes one still pending.
CREATE TABLE sync.wish_list (
	id				bigserial PRIMARY KEY,		-- never reused: a replica applies a wish once by it
	replica			uuid NOT NULL REFERENCES sync.replicas (id) ON DELETE CASCADE,
	tab				integer NOT NULL REFERENCES sync.tables (id) ON DELETE CASCADE,
	"values"		jsonb NOT NULL,				-- the columns it sets
	apply			text NOT NULL CHECK (apply IN ('always', 'if_unchanged')),
	expected		jsonb,						-- if_unchanged: those columns as the server last filed them
	fate			text NOT NULL DEFAULT 'pending'
		CHECK (fate IN ('pending', 'applied', 'declined', 'superseded')),
	why				text,
	made			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	decided			timestamptz,
	number			bigint						-- the message that carried it down; NULL: not sent yet
);
CREATE INDEX wish_list_pending ON sync.wish_list (replica, tab) WHERE fate = 'pending';
-- pruning reads the oldest decided wishes, at most its batch (sync.prune)
CREATE INDEX wish_list_decided ON sync.wish_list (decided) WHERE decided IS NOT NULL;
SELECT pg_catalog.pg_extension_config_dump('sync.wish_list', '');
SELECT pg_catalog.pg_extension_config_dump('sync.wish_list_id_seq', '');
COMMENT ON TABLE sync.wish_list IS 'The server''s wishes for replicas'' setting rows, and what became of each (sync.wish; read sync.wishes)';

CREATE FUNCTION sync.wish("table" regclass, key uuid, "values" jsonb, apply text DEFAULT 'always')
	RETURNS bigint
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wish';
COMMENT ON FUNCTION sync.wish(regclass, uuid, jsonb, text) IS
	'Wishes one replica''s row of a setting table changed, for the table''s owner: table, a setting table; key, the row''s origin (the replica''s uuid); values, a JSON object of the columns to set; apply, always (the replica takes it) or if_unchanged (only while its row still holds what the server last filed of those columns, else it keeps its own and says so). A newer wish for the row supersedes a pending one. Returns the wish''s id; sync.wishes says what became of it';

CREATE VIEW sync.wishes AS
	SELECT w.id, w.replica, t.relid AS "table",
		pg_catalog.jsonb_build_object(t.origin, w.replica) AS key,
		w."values", w.apply, w.fate, w.why, w.made, w.decided,
		w.number AS sent_in
	FROM sync.wish_list w JOIN sync.tables t ON t.id = w.tab;
COMMENT ON VIEW sync.wishes IS
	'Every wish and its fate: pending (not decided yet; sent_in is the message that carried it down, NULL until the relay sends it), applied, declined (the replica changed its row first: it keeps its own), superseded (a newer wish for the row came first), with why, when made and when decided; a decided wish until magic_sync.wishes_kept has passed (sync.prune)';
