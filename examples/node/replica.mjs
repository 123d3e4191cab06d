// replica.mjs - a magic_sync replica in Node.js, without the agent: the
// application's own SQLite file (better-sqlite3) with the replica extension
// loaded, and node-postgres moving the bytes (docs/protocol.md, section 1).
//
//   node replica.mjs EXTENSION FILE REPLICA_UUID     (PG* variables: the server)
//
// One round pulls what waits for the replica after the last message it
// applied (sync.pull) and applies each message (sync_apply), then files what
// the replica wrote and applied (sync_upload -> sync.file).  The application
// reads and writes the mirrored tables as plain SQLite tables meanwhile.
import Database from 'better-sqlite3';
import pg from 'pg';

// openReplica: the file, with magic_sync_sqlite loaded and the replica's uuid set
export function openReplica(file, extension, replica) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.loadExtension(extension);
  db.prepare('SELECT sync_init(?)').get(replica);
  return db;
}

// status: sync_status() as an object (applied: the last message applied)
export function status(db) {
  return JSON.parse(db.prepare('SELECT sync_status()').pluck().get());
}

// pullApply: every message waiting after the last one applied, in order;
// stops at one the replica cannot follow (a gap: the server provisions it)
export async function pullApply(db, client, replica, maxBytes = 1 << 24) {
  const results = [];
  const { rows } = await client.query(
    'SELECT number, message FROM sync.pull($1, $2, $3)', [replica, status(db).applied, maxBytes]);
  for (const { message } of rows) {
    const r = JSON.parse(db.prepare('SELECT sync_apply(?)').pluck().get(message));
    results.push(r);
    if (['gap', 'later_protocol', 'wrong_replica'].includes(r.result)) break;
  }
  return results;
}

// upload: the next upload filed, or false when the replica has nothing to say
export async function upload(db, client, replica, sender = { app: 'node' }) {
  const up = db.prepare('SELECT sync_upload()').pluck().get();
  if (up === null) return false;
  await client.query('SELECT sync.file($1, $2, $3)', [replica, up, JSON.stringify(sender)]);
  return true;
}

// syncRound: pull and apply, then upload and file, until nothing moves
export async function syncRound(db, client, replica, rounds = 4) {
  let moved = 0;
  for (let i = 0; i < rounds; i++) {
    const applied = await pullApply(db, client, replica);
    const filed = await upload(db, client, replica);
    if (applied.length === 0 && !filed) break;
    moved += applied.length + (filed ? 1 : 0);
  }
  return moved;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const [extension, file, replica] = process.argv.slice(2);
  if (!replica) {
    console.error('usage: node replica.mjs EXTENSION FILE REPLICA_UUID');
    process.exit(64);
  }
  const db = openReplica(file, extension, replica);
  const client = new pg.Client();
  await client.connect();
  const moved = await syncRound(db, client, replica);
  console.log(`${replica}: ${moved} messages and uploads moved; applied up to ${status(db).applied}`);
  await client.end();
  db.close();
}
