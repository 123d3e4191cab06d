-- What each replica is owed (src/pg/relay/record.c, transport/ack.c,
-- relay/observe.c): the messages written to it beyond its latest snapshot and
-- not yet acknowledged, and their bytes.  A pass adds what it wrote, a
-- snapshot starts them again from nothing, an acknowledgement takes off what
-- it let leave the outbox.  relay.c's outbox_bounds reads them, and counts
-- the outbox itself only for a replica they say is past its bounds: message
-- numbers are drawn for every replica from one sequence, so a replica's
-- numbers say nothing of how many messages it has.
-- Added after the views of 60_read.sql, as an updated 0.1 adds them (70_builds.sql).
ALTER TABLE sync.replicas ADD COLUMN owed_messages bigint NOT NULL DEFAULT 0,
	ADD COLUMN owed_bytes bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN sync.replicas.owed_messages IS 'Messages written to it beyond its latest snapshot and not yet acknowledged (checked against magic_sync.outbox_messages)';
COMMENT ON COLUMN sync.replicas.owed_bytes IS 'The bytes of those messages (checked against magic_sync.outbox_bytes)';
