-- Run by tests/sqlite/run-sql through the sqlite3 shell: every row must end in 1.
select 'key-int', sync_key(42) = '2:42';
select 'key-composite', sync_key('a', 'bc') = '1:a2:bc';
select 'key-no-collision', sync_key('a', 'bc') <> sync_key('ab', 'c');
select 'digest-empty', sync_digest_keys(k) = '{"count":0,"fnv":"cbf29ce484222325"}' from (select 1 as k where 0);
select 'digest-ints', sync_digest_keys(sync_key(v)) = '{"count":3,"fnv":"20ea5df0c6c56817"}'
  from (select '10' as v union all select '2' union all select '1');
select 'digest-composite', sync_digest_keys(sync_key(a, b)) = '{"count":3,"fnv":"c68dde8d6a76a47e"}'
  from (select 'a' as a, 'bc' as b union all select 'ab', 'c' union all select '', 'x');
select 'digest-uuid', sync_digest_keys(sync_key(v)) = '{"count":2,"fnv":"77eeeb7c8686dc0a"}'
  from (select '7c9e6679-7425-40de-944b-e07fc1f90ae7' as v union all select '0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1');
select 'digest-utf8', sync_digest_keys(k) = '{"count":4,"fnv":"b3507209eecde3e6"}'
  from (select sync_key('é') as k union all select sync_key('e') union all select sync_key('ε')
        union all select sync_key('é', '1'));
