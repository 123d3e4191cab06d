// loop.mjs - a replica's loop in Node.js, end to end: better-sqlite3 with
// magic_sync_sqlite loaded (examples/node/replica.mjs), node-postgres to a
// real server with the shop (examples/shop), as the store's own login role.
// The replica is provisioned, writes a sale and counts its shelf, the head
// office changes a price, and at the end the replica holds exactly its
// wanted set (sync.wanted, by digest per table), the server holds what the
// replica wrote, and nothing is left on its way.
//
//   node tests/node/loop.mjs /path/to/magic_sync_sqlite.so   (inside pg_virtualenv)
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { openReplica, status, syncRound } from '../../examples/node/replica.mjs';

const require = createRequire(new URL('../../examples/node/package.json', import.meta.url));
const pg = require('pg');

const extension = process.argv[2];
const OSLO = 'a1a1a1a1-0000-4000-8000-000000000001';
const DB = 'nodeshop';
let passed = 0;
let failed = 0;

function check(name, got, expected) {
  const g = JSON.stringify(got);
  const e = JSON.stringify(expected);
  if (g === e) passed++;
  else {
    failed++;
    console.log(`FAIL ${name}: got ${g}, expected ${e}`);
  }
}

function psql(db, ...args) {
  return execFileSync('psql', ['-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', db, ...args], { encoding: 'utf8' });
}

// relay: one pass, in the REPEATABLE READ transaction a pass needs
async function relay(admin) {
  await admin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  const { rows } = await admin.query('SELECT * FROM sync.relay_pass()');
  await admin.query('COMMIT');
  return rows[0];
}

// settle: relay and sync the replica until nothing moves
async function settle(admin, db, store) {
  for (let i = 0; i < 10; i++) {
    const did = await relay(admin);
    const moved = await syncRound(db, store, OSLO);
    if (Number(did.messages) === 0 && Number(did.provisioned) === 0 && moved === 0) return true;
  }
  return false;
}

// digests: {table: "count fnv"} of what the replica holds, and of its wanted set
function replicaDigests(db) {
  const out = {};
  for (const [t, d] of Object.entries(JSON.parse(db.prepare('SELECT sync_digest()').pluck().get())))
    if (d.count > 0) out[t] = `${d.count} ${d.fnv}`;
  return out;
}
async function serverDigests(admin, from, on = 't.relid = x.tab') {
  const { rows } = await admin.query(
    `SELECT t.name, (x.d).count::text || ' ' || (x.d).fnv AS d
       FROM (SELECT w.tab, sync.digest(w.key) AS d FROM ${from} w GROUP BY w.tab) x
       JOIN sync.tables t ON ${on}
      ORDER BY t.name`, [OSLO]);
  return Object.fromEntries(rows.map((r) => [r.name, r.d]));
}
const sorted = (o) => Object.fromEntries(Object.entries(o).sort());

const work = mkdtempSync(join(tmpdir(), 'magic_sync_node.'));
psql('postgres', '-c', `DROP DATABASE IF EXISTS ${DB}`, '-c', `CREATE DATABASE ${DB}`);
psql(DB, '-c', 'CREATE EXTENSION magic_sync', '-f', 'examples/shop/schema.sql',
  '-f', 'examples/shop/declare.sql', '-f', 'examples/shop/seed.sql');
const password = Math.random().toString(36).slice(2);
psql(DB, '-c', `CREATE ROLE store_oslo LOGIN PASSWORD '${password}'`,
  '-c', `SELECT sync.replica_add('${OSLO}', 'north', role => 'store_oslo')`);

const admin = new pg.Client({ database: DB });
await admin.connect();
await admin.query('SET client_min_messages = warning');
// the store connects as its own role, over TCP with its password
const store = new pg.Client({ database: DB, host: 'localhost', user: 'store_oslo', password });
await store.connect();
const db = openReplica(join(work, 'oslo.db'), extension, OSLO);

try {
  // provisioned: a snapshot of everything it should hold
  check('the replica settles after its snapshot', await settle(admin, db, store), true);
  check('it applied messages', status(db).applied > 0, true);
  const wanted = await serverDigests(admin, 'sync.wanted($1)');
  check('it holds products, stock and prices', ['prices', 'products', 'stock'].every((t) => t in wanted), true);
  check('after its snapshot it holds its wanted set', sorted(replicaDigests(db)), sorted(wanted));
  const tea = db.prepare('SELECT price FROM products WHERE id = 1').pluck().get();

  // the application writes: a sale (a record) and a count (its own column)
  db.prepare(`INSERT INTO sales (store, id, product, qty, total_cents, sold_at, v)
              VALUES (?, 1, 1, 2, 680, datetime('now'), 1)`).run(OSLO);
  db.prepare('UPDATE stock SET counted = 38 WHERE product = 1').run();
  // the head office writes: a price, and a new northern product
  await admin.query('UPDATE products SET price = price + 1 WHERE id = 1');
  await admin.query(`INSERT INTO products (id, name, region, price, cost)
                     VALUES (8, 'cloudberry jam', 'north', 7.90, 3.10)`);
  check('the replica settles after the writes', await settle(admin, db, store), true);

  const sale = await admin.query('SELECT qty, total_cents::int FROM sales WHERE store = $1 AND id = 1', [OSLO]);
  check("the server filed the replica's sale", sale.rows, [{ qty: 2, total_cents: 680 }]);
  const counted = await admin.query('SELECT counted FROM stock WHERE store = $1 AND product = 1', [OSLO]);
  check("the server has the replica's count", counted.rows, [{ counted: 38 }]);
  check("the head office's price reached the replica",
    db.prepare('SELECT price FROM products WHERE id = 1').pluck().get(), (Number(tea) + 1).toFixed(2));
  check('the new product reached the replica',
    db.prepare('SELECT name FROM products WHERE id = 8').pluck().get(), 'cloudberry jam');
  const progress = JSON.parse(db.prepare('SELECT sync_progress()').pluck().get());
  check('nothing of the replica is on its way',
    Object.values(progress).reduce((n, p) => n + p.unsent + p.unfiled + p.set_aside, 0), 0);
  const after = await serverDigests(admin, 'sync.wanted($1)');
  check('the replica ends holding its wanted set', sorted(replicaDigests(db)), sorted(after));
  const held = await serverDigests(admin,
    `(SELECT h.tab, h.key FROM sync.held h JOIN sync.replicas r ON r.id = h.replica
       WHERE h.replica = $1 AND h.taken IS NULL AND h.refused IS NULL AND h.number <= r.acked_number)`,
    't.id = x.tab');
  check('what the server records it holds is what it holds', sorted(replicaDigests(db)), sorted(held));
  const inbox = await admin.query('SELECT count(*)::int AS n FROM sync.inbox');
  check('no upload was set aside', inbox.rows, [{ n: 0 }]);
} finally {
  db.close();
  await store.end();
  await admin.end();
  rmSync(work, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
