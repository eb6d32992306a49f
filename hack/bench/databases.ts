import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The bench's throwaway databases, created and dropped through BENCH_ADMIN_DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres). A drop forces out the connections left open, so a
 * plane that failed half-way cannot keep its database alive.
 */
const ADMIN_DATABASE_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function adminQuery(statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

/** A new empty database on the admin URL's server; its URL. */
export async function createDatabase(): Promise<string> {
  const name = `acis_bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(`create database ${name}`);
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(databaseUrl: string): Promise<void> {
  await adminQuery(`drop database if exists ${new URL(databaseUrl).pathname.slice(1)} with (force)`);
}
