-- A one-row change is planned by index lookups, whatever the keys' types and
-- collations (issue 37).  zbugs, loaded as published (varchar keys under the
-- database's collation), took 4 to 28 s of SQL to plan one issue's title: the
-- plan compared a key column with a part of a canonical key, text COLLATE
-- "C", which the column's index, under another collation, cannot serve
-- (Seq Scan on issue ... loops=2000).  Here tables keyed by varchar, text
-- under another collation, a domain with a collation of its own, composite
-- keys of mixed types; foreign keys to unique constraints that are not the
-- key (citext, numeric, an enum, the key with a date); every pass explained
-- statement by statement (magic_sync.check_scans) with sequential scans off:
-- a table of the application read whole is one no index could serve, and
-- the pass says so.  After every step each replica holds its wanted set,
-- computed from scratch.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_keys;
\c contrib_regression_keys
SET client_min_messages = notice;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
CREATE EXTENSION citext;

-- zbugs' shape: varchar keys under the database's collation
CREATE TABLE project (id varchar PRIMARY KEY, owner uuid NOT NULL, name text NOT NULL);
CREATE TABLE issue (id varchar PRIMARY KEY, "projectID" varchar NOT NULL REFERENCES project, title text NOT NULL);
CREATE INDEX ON issue ("projectID");
CREATE TABLE comment (id varchar PRIMARY KEY, "issueID" varchar NOT NULL REFERENCES issue, body text NOT NULL);
CREATE INDEX ON comment ("issueID");
-- a label of a project; an issue's labels reference it with the project (a unique constraint, not its key)
CREATE TABLE label (id text PRIMARY KEY, "projectID" varchar NOT NULL REFERENCES project, name text NOT NULL,
                    UNIQUE (id, "projectID"));
CREATE INDEX ON label ("projectID");
CREATE TABLE "issueLabel" ("labelID" text NOT NULL, "issueID" varchar NOT NULL REFERENCES issue,
                           "projectID" varchar NOT NULL,
                           PRIMARY KEY ("labelID", "issueID"),
                           FOREIGN KEY ("labelID", "projectID") REFERENCES label (id, "projectID"));
CREATE INDEX ON "issueLabel" ("issueID");
-- keys under another collation than the database's, and a child under a third
CREATE TABLE tag (name text COLLATE "en-x-icu" PRIMARY KEY, note text);
CREATE TABLE tagging (id int PRIMARY KEY, tag text COLLATE "C" NOT NULL REFERENCES tag, "issueID" varchar NOT NULL REFERENCES issue);
CREATE INDEX ON tagging (tag);
CREATE INDEX ON tagging ("issueID");
-- a domain key with a collation of its own; composite keys of mixed types
CREATE DOMAIN code AS text COLLATE "und-x-icu" CHECK (VALUE <> '');
CREATE TABLE shelf (code code PRIMARY KEY, "projectID" varchar NOT NULL REFERENCES project);
CREATE INDEX ON shelf ("projectID");
CREATE TABLE slot (shelf code REFERENCES shelf, n smallint, at uuid, label varchar(20),
                   PRIMARY KEY (shelf, n, at, label));
CREATE TABLE item (id bigint PRIMARY KEY, shelf code NOT NULL, n smallint NOT NULL, at uuid NOT NULL,
                   label varchar(20) NOT NULL, FOREIGN KEY (shelf, n, at, label) REFERENCES slot);
CREATE INDEX ON item (label, at, n, shelf);
-- foreign keys to unique columns that are not the key: citext, numeric, an enum
CREATE TYPE size AS ENUM ('small', 'large');
CREATE TABLE account (id int PRIMARY KEY, email citext UNIQUE NOT NULL, "projectID" varchar NOT NULL REFERENCES project);
CREATE INDEX ON account ("projectID");
CREATE TABLE login (id int PRIMARY KEY, email citext NOT NULL REFERENCES account (email) ON UPDATE CASCADE);
CREATE INDEX ON login (email);
-- (a unique index, not a constraint)
CREATE TABLE band (id int PRIMARY KEY, code numeric(6,2) NOT NULL, "projectID" varchar NOT NULL REFERENCES project);
CREATE UNIQUE INDEX band_code ON band (code);
CREATE INDEX ON band ("projectID");
CREATE TABLE priced (id int PRIMARY KEY, band numeric(6,2) NOT NULL REFERENCES band (code));
CREATE INDEX ON priced (band);
CREATE TABLE box (id int PRIMARY KEY, size size UNIQUE NOT NULL, "projectID" varchar NOT NULL REFERENCES project);
CREATE INDEX ON box ("projectID");
CREATE TABLE packed (id int PRIMARY KEY, size size NOT NULL REFERENCES box (size));
CREATE INDEX ON packed (size);
-- a date in a unique constraint with the key
CREATE TABLE shift (id int PRIMARY KEY, day date NOT NULL, "projectID" varchar NOT NULL REFERENCES project, UNIQUE (id, day));
CREATE INDEX ON shift ("projectID");
CREATE TABLE duty (id int PRIMARY KEY, shift int NOT NULL, day date,
                   FOREIGN KEY (shift, day) REFERENCES shift (id, day) ON UPDATE CASCADE);
CREATE INDEX ON duty (day, shift);

INSERT INTO project SELECT 'p' || g, ('00000000-0000-0000-0000-00000000000' || (1 + g % 2))::uuid, 'project ' || g
  FROM generate_series(1, 3) g;
INSERT INTO issue SELECT 'i' || g, 'p' || (1 + g % 3), 't' || g FROM generate_series(1, 60) g;
INSERT INTO comment SELECT 'c' || g, 'i' || (1 + g % 60), 'b' FROM generate_series(1, 300) g;
INSERT INTO label SELECT 'l' || g, 'p' || (1 + g % 3), 'label ' || g FROM generate_series(1, 30) g;
-- an issue's label of its own project
INSERT INTO "issueLabel" SELECT 'l' || k, 'i' || g, 'p' || (1 + g % 3)
  FROM generate_series(1, 60) g, LATERAL (SELECT coalesce(nullif(3 * (g % 10) + g % 3, 0), 30) AS k) x;
INSERT INTO tag SELECT 'tag' || g, 'n' FROM generate_series(1, 50) g;
INSERT INTO tagging SELECT g, 'tag' || (1 + g % 50), 'i' || (1 + g % 60) FROM generate_series(1, 100) g;
INSERT INTO shelf SELECT 's' || g, 'p' || (1 + g % 3) FROM generate_series(1, 30) g;
INSERT INTO slot SELECT 's' || (1 + g % 30), g, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, 'L' || g
  FROM generate_series(1, 60) g;
INSERT INTO item SELECT g, shelf, n, at, label FROM slot s, generate_series(1, 3) g0, LATERAL (SELECT s.n * 10 + g0 AS g) x;
INSERT INTO account SELECT g, 'User' || g || '@Example.com', 'p' || (1 + g % 3) FROM generate_series(1, 100) g;
INSERT INTO login SELECT g, 'user' || (1 + g % 100) || '@example.COM' FROM generate_series(1, 100) g;
INSERT INTO band SELECT g, g * 1.5, 'p' || (1 + g % 3) FROM generate_series(1, 40) g;
INSERT INTO priced SELECT g, (1 + g % 40) * 1.5 FROM generate_series(1, 80) g;
INSERT INTO box VALUES (1, 'small', 'p1'), (2, 'large', 'p2');
INSERT INTO packed SELECT g, CASE g % 2 WHEN 0 THEN 'small' ELSE 'large' END::size FROM generate_series(1, 40) g;
INSERT INTO shift SELECT g, date '2026-01-01' + g, 'p' || (1 + g % 3) FROM generate_series(1, 60) g;
INSERT INTO duty SELECT g, 1 + g % 60, date '2026-01-01' + 1 + g % 60 FROM generate_series(1, 120) g;
ANALYZE;

SELECT count(*) FROM (
SELECT sync.mirror('project', 'catalog', 'assigned(owner)')
  UNION ALL SELECT sync.mirror('issue', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('comment', 'catalog', 'follows("issueID")')
  UNION ALL SELECT sync.mirror('label', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('"issueLabel"', 'catalog', 'follows("issueID")')
  UNION ALL SELECT sync.mirror('tag', 'catalog')
  UNION ALL SELECT sync.mirror('tagging', 'catalog', 'follows("issueID")')
  UNION ALL SELECT sync.mirror('shelf', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('slot', 'catalog', 'follows(shelf)')
  UNION ALL SELECT sync.mirror('item', 'catalog', 'follows(shelf)')
  UNION ALL SELECT sync.mirror('account', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('login', 'catalog', 'follows(email)')
  UNION ALL SELECT sync.mirror('band', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('priced', 'catalog', 'follows(band)')
  UNION ALL SELECT sync.mirror('box', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('packed', 'catalog', 'follows(size)')
  UNION ALL SELECT sync.mirror('shift', 'catalog', 'follows("projectID")')
  UNION ALL SELECT sync.mirror('duty', 'catalog', 'follows(shift)')) m;

-- a foreign key the relay walks with no index on its columns: said when
-- declared and by sync.check(), and the relay runs all the same
CREATE TABLE watcher (id int PRIMARY KEY, "issueID" varchar NOT NULL REFERENCES issue);
INSERT INTO watcher SELECT g, 'i' || g FROM generate_series(1, 10) g;
SELECT sync.mirror('watcher', 'catalog', 'follows("issueID")');
SELECT * FROM sync.check();
SELECT kind FROM sync.health() WHERE kind = 'declaration';
-- a foreign key to unique columns that are not the key, of a type a session
-- prints as its settings say: a note could not name the row it pointed at
CREATE TABLE stamp (id int PRIMARY KEY, at timestamptz UNIQUE NOT NULL);
CREATE TABLE stamped (id int PRIMARY KEY, at timestamptz REFERENCES stamp (at));
SELECT sync.mirror('stamp', 'catalog', 'broadcast');
SELECT sync.mirror('stamped', 'catalog', 'follows(at)');

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT notes_read > 0 AS read FROM sync.relay_pass();
UPDATE sync.replicas SET acked_number = last_number;
CREATE INDEX ON watcher ("issueID");
SELECT * FROM sync.check();

-- what each replica holds, against its wanted set from scratch
CREATE FUNCTION pg_temp.agrees() RETURNS TABLE (replica uuid, held bigint, agrees boolean)
	LANGUAGE sql SET magic_sync.check_scans = off SET enable_seqscan = on AS $$
	SELECT r.id, (SELECT count(*) FROM sync.held h WHERE h.replica = r.id AND h.taken IS NULL),
	       NOT EXISTS (SELECT FROM (SELECT w.tab, w.key FROM sync.wanted(r.id) w) w
	                   FULL JOIN (SELECT t.relid AS tab, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab
	                               WHERE h.replica = r.id AND h.taken IS NULL) h ON h.tab = w.tab AND h.key = w.key
	                   WHERE h.key IS NULL OR w.key IS NULL)
	  FROM sync.replicas r ORDER BY r.id $$;
SELECT * FROM pg_temp.agrees();
CREATE FUNCTION pg_temp.pass(OUT notes_read bigint, OUT rows_sent bigint, OUT rows_taken bigint, OUT agrees boolean)
	LANGUAGE sql AS $$
	SELECT p.notes_read, p.rows_sent, p.rows_taken, (SELECT bool_and(a.agrees) FROM pg_temp.agrees() a)
	  FROM sync.relay_pass() p $$;

SET enable_seqscan = off;
SET magic_sync.check_scans = on;
-- a comment edited; its issue renamed; the comment moved to another issue
UPDATE comment SET body = 'edited' WHERE id = 'c5';
SELECT * FROM pg_temp.pass();
UPDATE issue SET title = 'renamed' WHERE id = 'i5';
SELECT * FROM pg_temp.pass();
UPDATE comment SET "issueID" = 'i7' WHERE id = 'c5';
SELECT * FROM pg_temp.pass();
-- an issue moved to a project of the other replica, with its family
UPDATE issue SET "projectID" = 'p2' WHERE id = 'i9';
SELECT * FROM pg_temp.pass();
-- its label now one of a third project (a foreign key to a unique constraint with the key)
UPDATE "issueLabel" SET "labelID" = 'l2', "projectID" = 'p3' WHERE "issueID" = 'i9';
SELECT * FROM pg_temp.pass();
UPDATE label SET name = 'renamed' WHERE id = 'l2';
SELECT * FROM pg_temp.pass();
-- a tag, under its own collation, and a tagging under "C" pointing at another
UPDATE tag SET note = 'edited' WHERE name = 'tag3';
SELECT * FROM pg_temp.pass();
UPDATE tagging SET tag = 'tag9' WHERE id = 3;
SELECT * FROM pg_temp.pass();
-- the domain key's shelf moved; an item moved to a slot of another shelf (four key columns)
UPDATE shelf SET "projectID" = 'p3' WHERE code = 's4';
SELECT * FROM pg_temp.pass();
UPDATE item SET (shelf, n, at, label) = (SELECT shelf, n, at, label FROM slot WHERE n = 8) WHERE id = 71;
SELECT * FROM pg_temp.pass();
-- by citext, numeric and enum values: a login of another account, in another case
UPDATE login SET email = 'USER8@example.com' WHERE id = 3;
SELECT * FROM pg_temp.pass();
UPDATE account SET "projectID" = 'p3' WHERE id = 7;
SELECT * FROM pg_temp.pass();
UPDATE priced SET band = 7.50 WHERE id = 3;
SELECT * FROM pg_temp.pass();
UPDATE band SET "projectID" = 'p1' WHERE id = 4;
SELECT * FROM pg_temp.pass();
UPDATE packed SET size = 'large' WHERE id = 4;
SELECT * FROM pg_temp.pass();
-- a duty moved to another shift (id and date), then its date unset: it points at none
UPDATE duty SET (shift, day) = (SELECT id, day FROM shift WHERE id = 9) WHERE id = 3;
SELECT * FROM pg_temp.pass();
UPDATE duty SET day = NULL WHERE id = 4;
SELECT * FROM pg_temp.pass();
-- a batch of one note: a parent's unique columns changed, its children's
-- with them (ON UPDATE CASCADE); a held child's older version points at what
-- the batch changed, so its notes join the batch
SET magic_sync.batch_notes = 1;
UPDATE account SET email = 'moved@example.com' WHERE id = 8;
SELECT * FROM pg_temp.pass();
UPDATE shift SET day = day + 100 WHERE id = 9;
SELECT * FROM pg_temp.pass();
RESET magic_sync.batch_notes;
-- gone, and back under another issue
DELETE FROM comment WHERE id = 'c6';
SELECT * FROM pg_temp.pass();
INSERT INTO comment VALUES ('c6', 'i9', 'new');
SELECT * FROM pg_temp.pass();
RESET magic_sync.check_scans;
RESET enable_seqscan;
SELECT * FROM pg_temp.agrees();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_keys;
