-- Run by tests/sqlite/run-sql through the sqlite3 shell: every row must end in 1.
-- A replica as a user drives it by hand: the fuzz seeds are valid messages
-- (tests/fuzz/seeds: 00 begins a snapshot of the shop, 01 ends it, 02 and 03
-- follow 01, 04 is a Filed answer).
select 'empty-status', sync_status() ->> 'replica' is null and sync_status() ->> 'applied' = 0;
select 'empty-progress', sync_progress() = '{}';
select 'apply-begin', sync_apply(readfile('tests/fuzz/seeds/00_snapshot.bin')) ->> 'result' = 'applied';
select 'snapshot-open', sync_status() ->> 'snapshot' = 1;
select 'apply-end', sync_apply(readfile('tests/fuzz/seeds/01_end.bin')) ->> 'snapshot' = 'end';
select 'tables-made', count(*) = 4 from sqlite_master where type = 'table' and name in ('customers', 'products', 'orders', 'sales');
select 'rows', (select count(*) from customers) = 2 and (select count(*) from products) = 3;
select 'status', sync_status() ->> 'applied' = 2 and sync_status() ->> 'gap' = 0
  and sync_status() ->> 'replica' = '10111213-1415-4617-1819-1a1b1c1d1e1f';
select 'duplicate', sync_apply(readfile('tests/fuzz/seeds/01_end.bin')) ->> 'result' = 'duplicate';
select 'digest-products', (select json_object('count', json_extract(d, '$.count'), 'fnv', json_extract(d, '$.fnv')) from (select sync_digest('products') as d)) = (select sync_digest_keys(sync_key(id)) from products);
select 'digest-all', json_extract(sync_digest(), '$.customers.count') = 2;
select 'apply-json', sync_apply(readfile('tests/fuzz/seeds/02_down_json.bin')) ->> 'upserts' = 3;
select 'customer-3', name = 'Cy é' from customers where id = 3;
select 'customer-2-gone', count(*) = 0 from customers where id = 2;
select 'others-order', count(*) = 1 from orders where origin = '0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1';
-- the replica writes a record of its own and an owned column
insert into orders values ('10111213-1415-4617-1819-1a1b1c1d1e1f', 1, 1, 9.5, 'by hand');
update products set stock = 1 where id = 1;
select 'noted', sync_progress() ->> '$.orders.unsent' = 1 and sync_progress() ->> '$.products.unsent' = 1;
select 'upload', typeof(sync_upload()) = 'blob';
select 'sent', sync_progress() ->> '$.orders.unfiled' = 1 and sync_progress() ->> '$.orders.unsent' = 0;
select 'nothing-more', sync_upload() is null;
select 'config', sync_config('resend_after', 0) = 0;
select 'resend', typeof(sync_upload()) = 'blob';
select 'retry-none', sync_retry() = 0;
select 'filed-other-send', sync_apply(readfile('tests/fuzz/seeds/04_filed.bin')) ->> 'notes' = 0;
select 'still-unfiled', sync_progress() ->> '$.orders.unfiled' = 1;
