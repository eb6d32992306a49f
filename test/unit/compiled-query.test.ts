import { DummyDriver, Kysely, type LogEvent, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { describe, expect, it } from 'vitest';
import { compiledOnce } from '../../api-server/core/db/compiled-query.js';
import type { Database } from '../../api-server/core/db/schema.js';

/** A kysely that runs nothing (every query answers no rows) and records what it was asked to run. */
function recordingDb() {
  const executed: LogEvent['query'][] = [];
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (kysely) => new PostgresIntrospector(kysely),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    log: (event) => {
      executed.push(event.query);
    },
  });
  return { db, executed };
}

describe('compiledOnce', () => {
  it('runs the SQL and parameters kysely compiles for the same arguments, constants kept in place', async () => {
    const { db, executed } = recordingDb();
    const build = (d: Kysely<Database>, integrationId: string, externalId: string) =>
      d
        .selectFrom('tenants')
        .select('id')
        .where('integration_id', '=', integrationId)
        .where('status', '=', 'active')
        .where('external_id', '=', externalId)
        .where('parent_id', '=', integrationId);
    const lookup = compiledOnce(build);
    for (const [integrationId, externalId] of [
      ['int_a', 'eid-1'],
      ['int_b', 'eid-2'],
    ] as const) {
      await lookup(db, integrationId, externalId);
      const expected = build(db, integrationId, externalId).compile();
      expect(executed.at(-1)).toMatchObject({ sql: expected.sql, parameters: expected.parameters });
    }
    expect(executed.at(-1)?.parameters).toEqual(['int_b', 'active', 'eid-2', 'int_b']);
  });

  it('refuses a builder that does not use an argument as a plain value', async () => {
    const { db } = recordingDb();
    const transformed = compiledOnce((d: Kysely<Database>, externalId: string) =>
      d.selectFrom('tenants').select('id').where('external_id', '=', externalId.toLowerCase()),
    );
    await expect(transformed(db, 'x')).rejects.toThrow(/argument 0 is not used as a query value/);
  });
});
