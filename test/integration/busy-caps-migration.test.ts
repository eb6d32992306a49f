import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../api-server/core/db/database.js';
import { migrateBefore, useMigrationDatabase } from '../helpers/migration-database.js';

const database = useMigrationDatabase();

describe('migration 0014 (busy-sandbox caps)', () => {
  it('gives existing tenants both caps as null (the deployment default), in settings and in what the API shows', async () => {
    const db = database();
    await migrateBefore(db, '0014');
    await sql`insert into integrations (id, name, root_tenant_id, created_at) values ('int_old', 'old', 'tnt_root', now())`.execute(db);
    await sql`insert into tenants (id, integration_id, name, status, settings, metadata, created_at, updated_at)
      values ('tnt_root', 'int_old', 'Root', 'active', '{"max_concurrent_warm": 7}'::jsonb, '{}'::jsonb, now(), now())`.execute(db);

    expect(await migrateToLatest(db)).toContain('0014-busy-sandbox-caps');

    const row = (await sql<{ settings: object; api_json: string }>`select settings, api_json from tenants`.execute(db)).rows[0]!;
    const expected = { max_concurrent_warm: 7, max_busy_sandboxes: null, max_busy_sandboxes_per_user: null };
    expect(row.settings).toEqual(expected);
    expect(JSON.parse(row.api_json).settings).toEqual(expected);
  });
});
