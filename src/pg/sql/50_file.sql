-- Filing what replicas say (src/pg/transport/file.c and its parts, file.h).

CREATE FUNCTION sync.file(replica uuid, upload bytea, sender jsonb DEFAULT NULL) RETURNS jsonb
	LANGUAGE c VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_file';
COMMENT ON FUNCTION sync.file(uuid, bytea, jsonb) IS
	'Files one upload of a replica in one transaction: its acknowledgement, refusals, rows, digests and backlog; queues its Filed answer for sync.pull; says what became of it';

CREATE FUNCTION sync.inbox_retry(max integer DEFAULT 100) RETURNS integer
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_inbox_retry';
COMMENT ON FUNCTION sync.inbox_retry(integer) IS
	'Files again up to max rows of the inbox whose backoff has passed; returns how many went through';
