-- examples/shop/schema.sql: a head office and its stores, as the head
-- office's PostgreSQL database sees them.  Nothing here knows magic_sync:
-- declare.sql says which tables travel and to whom; seed.sql fills them.

-- Products: the head office's catalogue.  Every store of a region holds the
-- products of its region; cost is the head office's own business.
CREATE TABLE products (
	id			int PRIMARY KEY,
	name		text NOT NULL,
	region		text NOT NULL,
	price		numeric(10,2) NOT NULL,
	cost		numeric(10,2)
);

-- Stores: each holds its own row.
CREATE TABLE stores (
	id			uuid PRIMARY KEY,
	name		text NOT NULL,
	region		text NOT NULL
);

-- Stock per store: qty is what the head office expects, counted what the
-- store counted on its shelves (the store's column, sent back up).
CREATE TABLE stock (
	store		uuid NOT NULL REFERENCES stores,
	product		int NOT NULL REFERENCES products,
	qty			int NOT NULL,
	counted		int,
	PRIMARY KEY (store, product)
);

-- Customers have no rule of their own: a store holds those its orders name.
CREATE TABLE customers (
	id			int PRIMARY KEY,
	name		text NOT NULL,
	city		text
);

-- Orders to collect at a store, and their lines; a store holds its open ones.
CREATE TABLE orders (
	id			int PRIMARY KEY,
	store		uuid NOT NULL REFERENCES stores,
	customer	int REFERENCES customers,
	status		text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
	placed		date NOT NULL DEFAULT current_date
);
CREATE VIEW open_orders AS SELECT * FROM orders WHERE status = 'open';

CREATE TABLE order_lines (
	order_id	int NOT NULL REFERENCES orders ON DELETE CASCADE,
	line		int NOT NULL,
	product		int NOT NULL REFERENCES products,
	qty			int NOT NULL,
	PRIMARY KEY (order_id, line)
);

-- Price lists, given to groups of stores: a list is a member of groups
-- (price_list_groups), a group is given to stores (group_stores).
CREATE TABLE price_lists (
	id			int PRIMARY KEY,
	name		text NOT NULL
);
CREATE TABLE price_list_groups (
	price_list	int NOT NULL REFERENCES price_lists ON DELETE CASCADE,
	grp			text NOT NULL,
	PRIMARY KEY (price_list, grp)
);
CREATE TABLE group_stores (
	grp			text NOT NULL,
	store		uuid NOT NULL,
	PRIMARY KEY (grp, store)
);
CREATE TABLE prices (
	price_list	int NOT NULL REFERENCES price_lists ON DELETE CASCADE,
	product		int NOT NULL REFERENCES products,
	price		numeric(10,2) NOT NULL,
	PRIMARY KEY (price_list, product)
);

-- Sales: written at the stores, keyed by the store that made them; the
-- newest version of a sale wins (a store corrects one by raising v).  No
-- default: defaults and constraints do not travel, a store writes every column.
CREATE TABLE sales (
	store		uuid NOT NULL REFERENCES stores,
	id			int NOT NULL,
	product		int NOT NULL REFERENCES products,
	qty			int NOT NULL,
	total_cents	bigint NOT NULL,
	sold_at		text,
	v			bigint NOT NULL,
	PRIMARY KEY (store, id)
);

-- The relay looks up the rows pointing at a row by the foreign key's columns
-- (docs/guide.md): each key it follows gets an index, or sync.mirror says so.
CREATE INDEX ON stock (product);
CREATE INDEX ON orders (customer);
CREATE INDEX ON orders (store);
CREATE INDEX ON order_lines (product);
CREATE INDEX ON prices (product);
CREATE INDEX ON sales (product);
