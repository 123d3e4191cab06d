-- Names and comments: every object of schema sync is documented, every
-- argument of sync.mirror is named in its comment (PostgreSQL has no comment
-- per argument), and the states and JSON keys are in one style (snake_case).

-- tables, views, types, functions without a comment: none
SELECT c.oid::regclass AS undocumented FROM pg_class c
 WHERE c.relnamespace = 'sync'::regnamespace AND c.relkind IN ('r', 'v', 'p')
   AND obj_description(c.oid, 'pg_class') IS NULL;
SELECT p.oid::regprocedure AS undocumented FROM pg_proc p
 WHERE p.pronamespace = 'sync'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL
   AND p.oid NOT IN (SELECT a.aggtransfn FROM pg_aggregate a UNION SELECT a.aggfinalfn FROM pg_aggregate a);
-- every argument of sync.mirror, named in its comment as "name, ..."
SELECT a.name AS undocumented_argument
  FROM pg_proc p CROSS JOIN LATERAL unnest(p.proargnames) a(name)
 WHERE p.oid = 'sync.mirror'::regproc
   AND strpos(obj_description(p.oid, 'pg_proc'), '; ' || a.name || ', ') = 0
   AND strpos(obj_description(p.oid, 'pg_proc'), ': ' || a.name || ', ') = 0;
SELECT array_length(proargnames, 1) AS mirror_arguments FROM pg_proc WHERE oid = 'sync.mirror'::regproc;
-- the states, in snake_case and in order of severity
SELECT enum_range(NULL::sync.state);
SELECT 'on_its_way'::sync.state < 'set_aside'::sync.state AS ordered;
-- sync.listing takes a state by its name
SELECT count(*) FROM sync.listing(state => 'on_its_way');
SELECT count(*) FROM sync.listing(state => 'on its way');
-- sync.overview's keys, at every depth: no space, no capital
SELECT DISTINCT k AS key_not_snake_case
  FROM (SELECT jsonb_object_keys(o) k FROM sync.overview() o
        UNION ALL SELECT jsonb_object_keys(sync.overview() -> 'states')
        UNION ALL SELECT jsonb_object_keys(sync.overview() -> 'scope')) x
 WHERE k !~ '^[a-z][a-z0-9_]*$';
