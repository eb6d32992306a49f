import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledOnce } from '../../api-server/core/db/compiled-query.js';
import { type DatabaseHandle, type Db, migrateToLatest, openDatabase } from '../../api-server/core/db/database.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';

/**
 * Compiled queries on PostgreSQL: on the database itself they run straight on its pool, in a
 * transaction on the transaction's connection; either way with kysely's answers and pg's errors.
 */
let databaseUrl: string;
let database: DatabaseHandle;

const integrationNamed = compiledOnce((db: Db, name: string) =>
  db.selectFrom('integrations').select(['id', 'name', 'created_at']).where('name', '=', name),
);
const integrationsCreatedAfter = compiledOnce((db: Db, after: Date) =>
  db.selectFrom('integrations').select('id').where('created_at', '>', after),
);

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  database = await openDatabase({ databaseUrl, dataDir: '', poolSize: 3 });
  await migrateToLatest(database.db);
});

afterAll(async () => {
  await database?.close();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

async function insertIntegration(db: Db, id: string, name: string): Promise<void> {
  await db
    .insertInto('integrations')
    .values({ id, name, root_tenant_id: `tnt_${id}`, created_at: new Date('2026-01-02T03:04:05.678Z') })
    .execute();
}

describe('compiled queries on PostgreSQL', () => {
  it('answer rows as kysely does (types parsed by pg), on the pool and inside a transaction', async () => {
    const { db } = database;
    await insertIntegration(db, 'int_compiled_a', 'compiled a');
    const built = await db.selectFrom('integrations').select(['id', 'name', 'created_at']).where('name', '=', 'compiled a').execute();
    const compiled = await integrationNamed(db, 'compiled a');
    expect(compiled).toEqual(built);
    expect(compiled[0]?.created_at).toEqual(new Date('2026-01-02T03:04:05.678Z'));
    expect(await db.transaction().execute((trx) => integrationNamed(trx, 'compiled a'))).toEqual(built);
    expect(await integrationsCreatedAfter(db, new Date('2026-01-01T00:00:00Z'))).toEqual([{ id: 'int_compiled_a' }]);
  });

  it('see a transaction’s own writes inside it, and not from outside before it commits', async () => {
    const { db } = database;
    let releaseWriter: () => void = () => {};
    const writerMayCommit = new Promise<void>((resolve) => (releaseWriter = resolve));
    let written: () => void = () => {};
    const uncommitted = new Promise<void>((resolve) => (written = resolve));
    const writer = db.transaction().execute(async (trx) => {
      await insertIntegration(trx, 'int_compiled_tx', 'compiled tx');
      expect(await integrationNamed(trx, 'compiled tx')).toHaveLength(1);
      written();
      await writerMayCommit;
    });
    await uncommitted;
    expect(await integrationNamed(db, 'compiled tx')).toEqual([]);
    releaseWriter();
    await writer;
    expect(await integrationNamed(db, 'compiled tx')).toHaveLength(1);
  });

  it('reject with PostgreSQL’s error, and leave the pool usable', async () => {
    const { db } = database;
    const invalid = compiledOnce((d: Db, at: string) =>
      d.selectFrom('integrations').select('id').where('created_at', '=', sql<Date>`${at}::timestamptz`),
    );
    await expect(invalid(db, 'not a time')).rejects.toMatchObject({ code: '22007' });
    // Every connection of the pool (3) was handed back: more calls than that at once all answer.
    const answers = await Promise.all(Array.from({ length: 8 }, () => integrationNamed(db, 'compiled a')));
    expect(answers.every((rows) => rows.length === 1)).toBe(true);
  });
});
