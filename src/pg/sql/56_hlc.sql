-- The server's hybrid logical clock (src/pg/hlc_clock.c,
-- docs/protocol.md 12): one row once a clock is stored (none before: 0), the greatest clock any upload brought that
-- was ahead of the server's physical time, and not too far ahead.  Every message to a
-- replica carries the greater of it and the physical time (ToReplica.clock),
-- so a replica whose clock is behind stamps its next write after what it saw.
CREATE TABLE sync.clock (
	one				boolean PRIMARY KEY DEFAULT true CHECK (one),
	hlc				bigint NOT NULL DEFAULT 0 CHECK (hlc >= 0)	-- (ms << 16) | counter
);
COMMENT ON TABLE sync.clock IS
	'The server''s hybrid logical clock, (ms << 16) | counter: the greatest clock an upload brought (docs/protocol.md 12)';
SELECT pg_catalog.pg_extension_config_dump('sync.clock', '');
