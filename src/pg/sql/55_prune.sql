-- Pruning (run by the relay worker after each pass, in small batches).

CREATE FUNCTION sync.prune(max integer DEFAULT 10000,
	OUT notes bigint, OUT bodies bigint, OUT answers bigint)
	LANGUAGE sql VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH n AS (
		DELETE FROM sync.notes WHERE id IN (SELECT id FROM sync.notes WHERE done ORDER BY id LIMIT max)
		RETURNING 1),
	b AS (
		DELETE FROM sync.bodies WHERE id IN (
			SELECT b.id FROM sync.bodies b
			 WHERE NOT EXISTS (SELECT FROM sync.outbox o WHERE o.body = b.id) LIMIT max)
		RETURNING 1),
	a AS (
		DELETE FROM sync.answers WHERE (replica, send_id) IN (
			SELECT replica, send_id FROM sync.answers
			 WHERE pulled < now() - interval '1 hour' LIMIT max)
		RETURNING 1)
	SELECT (SELECT count(*) FROM n), (SELECT count(*) FROM b), (SELECT count(*) FROM a)
$$;
COMMENT ON FUNCTION sync.prune(integer) IS
	'Removes up to max each of: notes done, bodies no message carries, answers pulled over an hour ago';
