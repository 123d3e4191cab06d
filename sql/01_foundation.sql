-- The extension creates schema sync, and the server computes the digests of
-- docs/protocol.md exactly as a replica does (tests/unit/vectors.c).
SELECT nspname FROM pg_namespace WHERE nspname = 'sync';
SELECT extname, extversion, extrelocatable FROM pg_extension WHERE extname = 'magic_sync';

-- canonical keys
SELECT sync.key(ARRAY['42']) AS int_key, sync.key(ARRAY['a', 'bc']) AS composite,
       sync.key(ARRAY['', 'x']) AS empty_part, sync.key(ARRAY['é']) AS utf8;
SELECT sync.key_parts('1:a2:bc'), sync.key_parts(sync.key(ARRAY['ab', 'c']));
SELECT sync.key(ARRAY['a', 'bc']) <> sync.key(ARRAY['ab', 'c']) AS no_collision;
SELECT sync.key(ARRAY[]::text[]);
SELECT sync.key(ARRAY['a', NULL]);
SELECT sync.key_parts('01:a');

-- the vectors: (count, fnv) of each set of keys, in any order
SELECT (sync.digest(k)).* FROM (SELECT NULL::text WHERE false) AS e(k);
SELECT (sync.digest(sync.key(ARRAY[p]))).*
  FROM unnest(ARRAY['10', '2', '1']) AS p;
SELECT (sync.digest(sync.key(p))).*
  FROM (VALUES (ARRAY['a', 'bc']), (ARRAY['ab', 'c']), (ARRAY['', 'x'])) AS v(p);
SELECT (sync.digest(sync.key(ARRAY[p]))).*
  FROM unnest(ARRAY['7c9e6679-7425-40de-944b-e07fc1f90ae7',
                    '0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1']) AS p;
SELECT (sync.digest(sync.key(p))).*
  FROM (VALUES (ARRAY['é']), (ARRAY['e']), (ARRAY['ε']), (ARRAY['é', '1'])) AS v(p);
-- order does not matter
SELECT (sync.digest(k ORDER BY k DESC)).fnv = (sync.digest(k ORDER BY k)).fnv AS order_free
  FROM (SELECT sync.key(ARRAY[g::text]) FROM generate_series(1, 1000) g) AS s(k);
SELECT sync.digest('not a key');
