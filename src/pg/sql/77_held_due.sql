-- A snapshot whose held rows are recorded after its pass (src/pg/relay/record.c):
-- the worker writes the held rows of the tables a snapshot reads whole once the
-- pass committed, in a transaction of its own, while the replica pulls and
-- applies.  held_due names that snapshot until then; a pass that finds it set
-- (the worker died in between) provisions the replica again (relay/observe.c).
-- Added after the views of 60_read.sql, as an updated 0.1 adds it (70_builds.sql).
ALTER TABLE sync.replicas ADD COLUMN held_due bigint;
COMMENT ON COLUMN sync.replicas.held_due IS 'The snapshot whose held rows of tables read whole the relay records after its pass; NULL once recorded';
