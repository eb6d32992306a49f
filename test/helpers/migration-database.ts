/**
 * A database of its own for a migration's test: migrated up to just before the migration under test,
 * as a deployment upgraded from then holds it, then given rows of that time and migrated on.
 */
import { Kysely, Migrator, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, expect } from 'vitest';
import { MIGRATIONS } from '../../api-server/core/db/database.js';
import { createTestDatabase, dropTestDatabase } from './test-server.js';

/** Registers the suite's database; the getter answers once `beforeAll` ran. */
export function useMigrationDatabase(): () => Kysely<any> {
  let databaseUrl: string;
  let db: Kysely<any>;
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 2 }) }) });
  });
  afterAll(async () => {
    await db?.destroy();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });
  return () => db;
}

/** Runs the migrations whose names sort before `before` (e.g. '0014'). */
export async function migrateBefore(db: Kysely<any>, before: string): Promise<void> {
  const earlier = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < before));
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => earlier } }).migrateToLatest();
  expect(error).toBeUndefined();
}
