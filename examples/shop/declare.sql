-- examples/shop/declare.sql: which tables travel, which way, and to whom.
-- Run as a member of sync_admin, after CREATE EXTENSION magic_sync.

-- Catalogue tables go down.  Products: every store of the product's region
-- (the replica's partition), and any other store that points at one.
SELECT sync.mirror('products', 'catalog', 'broadcast', "partition" => 'region',
	unmirrored => '{cost}');
-- a store holds its own row
SELECT sync.mirror('stores', 'catalog', 'assigned(id)');
-- its stock, and counted is the store's: the store writes it, it comes up
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
-- no rule: a customer travels with the orders that point at it
SELECT sync.mirror('customers', 'catalog');
-- its open orders, and their lines wherever their order goes
SELECT sync.mirror('orders', 'catalog', 'assigned(store)', active => 'open_orders');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
-- the price lists of the groups given to the store, and their prices
SELECT sync.mirror('price_lists', 'catalog',
	'grouped(members => public.price_list_groups, assigned => public.group_stores)');
SELECT sync.mirror('prices', 'catalog', 'follows(price_list)');
-- Records come up: a sale is the store's, keyed by it, newest version wins.
SELECT sync.mirror('sales', 'record', origin => 'store', version => 'v');
