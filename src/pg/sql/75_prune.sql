-- Pruning (run by the relay worker after each pass, in small batches, each
-- its own transaction).  Every step reads at most `max` rows, by an index:
-- a backlog of done notes left by a large change costs each pass a batch,
-- never a scan of the tables.  PL/pgSQL, not SQL: a SQL function's body is
-- parsed and planned again at every call (~1.3 ms, once a second in the
-- worker: bench/passcost.py), PL/pgSQL keeps its plans for the session.
-- Both plan it without the value of max, so the plans are the same.

CREATE FUNCTION sync.prune(max integer DEFAULT 10000,
	OUT notes bigint, OUT bodies bigint, OUT answers bigint, OUT wishes bigint)
	LANGUAGE plpgsql VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	-- the oldest done notes, by notes_done, deleted by their row's address
	WITH n AS (
		DELETE FROM sync.notes WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM sync.notes WHERE done ORDER BY id LIMIT max))
		RETURNING 1),
	-- bodies are numbered as they are stored: every body older than the
	-- oldest one a message carries is carried by none (outbox_body)
	b AS (
		DELETE FROM sync.bodies WHERE id = ANY (ARRAY(
			SELECT b.id FROM sync.bodies b
			 WHERE b.id < coalesce((SELECT min(o.body) FROM sync.outbox o), 9223372036854775807)
			 ORDER BY b.id LIMIT max))
		RETURNING 1),
	a AS (
		DELETE FROM sync.answers WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM sync.answers
			 WHERE pulled < now() - interval '1 hour' ORDER BY pulled LIMIT max))
		RETURNING 1),
	-- wishes decided longer ago than magic_sync.wishes_kept, by
	-- wish_list_decided; a pending one is never pruned (the library may not
	-- be loaded in this session: its default then)
	w AS (
		DELETE FROM sync.wish_list WHERE id = ANY (ARRAY(
			SELECT id FROM sync.wish_list
			 WHERE decided < now() - coalesce(nullif(current_setting('magic_sync.wishes_kept', true), ''), '7d')::interval
			 ORDER BY decided LIMIT max))
		RETURNING 1)
	SELECT (SELECT count(*) FROM n), (SELECT count(*) FROM b), (SELECT count(*) FROM a), (SELECT count(*) FROM w)
	  INTO notes, bodies, answers, wishes;
END
$$;
COMMENT ON FUNCTION sync.prune(integer) IS
	'Removes up to max each of: notes done (oldest first), bodies older than any a message carries, answers pulled over an hour ago, wishes decided longer ago than magic_sync.wishes_kept (oldest first)';
