// PostgreSQL side of the benchmark (STORE=postgres): a fresh database per run on the sitting's server, and the
// same measures for every framework: the tables' bytes (pg_total_relation_size: heap, TOAST and indexes) and the
// WAL the server wrote while the timed phases ran.
// PG_URL is a libpq/node-postgres URL to the server's `postgres` database (scripts/bench starts a cluster).
import pg from 'pg';

export const PG_URL = process.env.PG_URL || '';

export function dbUrl(name) {
  if (!PG_URL.includes('/postgres')) throw new Error(`PG_URL must name the postgres database: ${PG_URL}`);
  return PG_URL.replace('/postgres', `/${name}`);
}

async function admin(fn) {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try { return await fn(c); } finally { await c.end(); }
}

export async function freshPgDb(name) {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name}`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  return dbUrl(name);
}

export async function dropPgDb(name) {
  await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name}`));
}

export async function walLsn() {
  return admin(async (c) => (await c.query('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0].l);
}

export async function walBytesSince(lsn) {
  return admin(async (c) => Number((await c.query('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1) AS d', [lsn])).rows[0].d));
}

// Bytes of every table of the public schema with its TOAST and indexes, and each table's rows.
export async function tableStats(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const t = await c.query(`SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`);
    const rows = {};
    let bytes = 0;
    for (const r of t.rows) {
      bytes += Number(r.bytes);
      rows[r.name] = Number((await c.query(`SELECT count(*) AS n FROM "${r.name}"`)).rows[0].n);
    }
    return { bytes, rows };
  } finally {
    await c.end();
  }
}
