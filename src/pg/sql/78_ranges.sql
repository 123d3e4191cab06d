-- Range repair (src/pg/transport/range.c, docs/protocol.md 8.1): the open
-- question of the server's about what a replica holds of a table, narrowing
-- down a digest that differs; one per replica and table, gone once the rows
-- that differ are marked to go again (sync.held.replace), or left split -1
-- when the whole table matched (its digest differing again is a snapshot).
CREATE TABLE sync.ranges (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	round			bigint NOT NULL,			-- said back by the answer
	depth			int NOT NULL,				-- of the buckets asked about
	split			int NOT NULL,				-- 0: their rows; -1: the whole table matched
	buckets			bigint[] NOT NULL,			-- ascending, as unsigned
	of_values		boolean NOT NULL DEFAULT false,	-- of the rows' values hashes: a values digest narrowed
	asked_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- a values question's first (the whole table): the server's buckets at depth + split,
	-- their rows and sums, made by the values digest's walk that asked it, so its answer
	-- is compared without reading the table again; NULL: read when answered
	held_buckets	bigint[],
	held_counts		bigint[],
	held_sums		bigint[],
	PRIMARY KEY (replica, tab)
);
COMMENT ON TABLE sync.ranges IS 'Range repair: the open question to each replica about a table whose digest differs';
