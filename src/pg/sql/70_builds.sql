-- What each replica runs (src/pg/transport/refused.c): the build and the
-- protocol its last upload said (Up.build, field 14; '' from a library
-- before it).  When either changes, the rows it refused are sent to it again
-- at once: a fix deployed on the replica may take them.  At most once in ten
-- minutes (build_due): a replica that says a new build in every upload makes
-- them due no more often.
-- Added after the views of 60_read.sql, as an updated 0.1 adds them: those
-- views read sync.replicas through r.*, fixed when they were made, and an
-- updated catalog must be what a fresh install makes.
ALTER TABLE sync.replicas ADD COLUMN build text, ADD COLUMN protocol int, ADD COLUMN build_due timestamptz;
COMMENT ON COLUMN sync.replicas.build IS 'The build its last upload said it runs (Up.build): a change sends the rows it refused again at once';
COMMENT ON COLUMN sync.replicas.protocol IS 'The protocol of its last upload: a change sends the rows it refused again at once';
COMMENT ON COLUMN sync.replicas.build_due IS 'When a change of its build or protocol last made the rows it refused due: the next makes them due ten minutes after, at the earliest';
