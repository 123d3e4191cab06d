-- Every message to a replica is signed with the installation's key
-- (docs/protocol.md 2.4, src/pg/signing.c): one Ed25519 key, made by the
-- first pass that signs and kept across epochs, whose public half anyone
-- may read (a replica's agent pins it) and whose private half only the
-- extension reads.  A message changed under its signature does not verify.
-- In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_signing;
\c contrib_regression_signing
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
CREATE ROLE signing_nobody;
CREATE ROLE signing_admin IN ROLE sync_admin;

CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('items', 'catalog', 'broadcast');
SELECT sync.replica_add('bbbbbbbb-0000-0000-0000-000000000001');
INSERT INTO items VALUES (1, 'one'), (2, 'two');

-- no key before the first pass: not CREATE EXTENSION's (a restored dump brings its own)
SELECT count(*) AS keys, sync.signing_key() IS NULL AS none_yet FROM sync.signing_key;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS keys, octet_length(sync.signing_key()) AS public_bytes FROM sync.signing_key;
SELECT encode(sync.signing_key(), 'hex') AS key \gset

-- every message pulled is signed, and verifies under the server's key
SELECT count(*) AS messages, bool_and((sync.inspect(message) ->> 'signed')::boolean) AS signed,
       bool_and((sync.inspect(message) ->> 'sealed')::boolean) AS sealed
  FROM sync.pull('bbbbbbbb-0000-0000-0000-000000000001', 0);
-- between the head and the body: its tag and length (0x72 0x40), then 64 bytes, last of the head
SELECT bool_and(substr(head, octet_length(head) - 65, 2) = '\x7240'::bytea) AS last_of_the_head
  FROM sync.outbox WHERE replica = 'bbbbbbbb-0000-0000-0000-000000000001';
-- a byte of a row changed under it ("one" -> "xne"): the message reads, its signature fails
SELECT sync.inspect(overlay(message PLACING 'x'::bytea FROM position('"one"'::bytea IN message) + 1 FOR 1))
         -> 'down' -> 'tables' -> 0 -> 'upserts' -> 0 AS changed_row,
       sync.inspect(overlay(message PLACING 'x'::bytea FROM position('"one"'::bytea IN message) + 1 FOR 1))
         ->> 'signed' AS signed
  FROM sync.pull('bbbbbbbb-0000-0000-0000-000000000001', 0)
 WHERE position('"one"'::bytea IN message) > 0;

-- a new epoch provisions every replica again, under the same key: a forged
-- snapshot of a new epoch brings no key of its own
SELECT sync.epoch_begin('a test') IS NOT NULL AS new_epoch;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS keys, encode(sync.signing_key(), 'hex') = :'key' AS same_key FROM sync.signing_key;
SELECT count(DISTINCT sync.inspect(message) ->> 'epoch') AS epochs,
       bool_and((sync.inspect(message) ->> 'signed')::boolean) AS signed
  FROM sync.pull('bbbbbbbb-0000-0000-0000-000000000001', 0);

-- anyone reads the public key; sync_admin reads its public half, never the private one
SET ROLE signing_nobody;
SELECT encode(sync.signing_key(), 'hex') = :'key' AS anyone_reads_it;
SELECT private_key FROM sync.signing_key;
SET ROLE signing_admin;
SELECT encode(public_key, 'hex') = :'key' AS admin_reads_public FROM sync.signing_key;
SELECT private_key FROM sync.signing_key;
RESET ROLE;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_signing;
DROP ROLE signing_nobody;
DROP ROLE signing_admin;
