-- What each replica runs (src/pg/transport/refused.c): the build and the
-- protocol its last upload said (Up.build, field 14; '' from a library
-- before it).  When either changes, the rows it refused are sent to it again
-- at once: a fix deployed on the replica may take them.
-- Added after the views of 60_read.sql, as an updated 0.1 adds them: those
-- views read sync.replicas through r.*, fixed when they were made, and an
-- updated catalog must be what a fresh install makes.
ALTER TABLE sync.replicas ADD COLUMN build text, ADD COLUMN protocol int;
COMMENT ON COLUMN sync.replicas.build IS 'The build its last upload said it runs (Up.build): a change sends the rows it refused again at once';
COMMENT ON COLUMN sync.replicas.protocol IS 'The protocol of its last upload: a change sends the rows it refused again at once';
