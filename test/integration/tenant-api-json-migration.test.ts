import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../api-server/core/db/database.js';
import type { TenantRow } from '../../api-server/tenants/tenants.repository.js';
import { presentTenant } from '../../api-server/tenants/tenants.service.js';
import { migrateBefore, useMigrationDatabase } from '../helpers/migration-database.js';

const database = useMigrationDatabase();

describe('migration 0010 (tenant api_json)', () => {
  it('renders the tenants that existed before it, as presentTenant does', async () => {
    const db = database();
    await migrateBefore(db, '0010');
    await sql`insert into integrations (id, name, root_tenant_id, created_at) values ('int_old', 'old', 'tnt_root', now())`.execute(db);
    const rows = [
      ['tnt_root', null, null, 'Root', 'active', '{"max_concurrent_warm": 5}', '{}', '2025-01-02T03:04:05.678Z'],
      [
        'tnt_child',
        'tnt_root',
        'ext "1" \\ ü',
        'Çhild \u2028 😀',
        'suspended',
        '{"filler_enabled": false}',
        '{"k": "v\\n"}',
        '2026-06-07T08:09:10.5Z',
      ],
    ];
    for (const [id, parent, external, name, status, settings, metadata, at] of rows) {
      await sql`insert into tenants (id, integration_id, parent_id, external_id, name, status, settings, metadata, created_at, updated_at)
        values (${id}, 'int_old', ${parent}, ${external}, ${name}, ${status}, ${settings}::jsonb, ${metadata}::jsonb, ${at}, ${at})`.execute(
        db,
      );
    }

    expect((await migrateToLatest(db))[0]).toBe('0010-tenant-api-json');

    const stored = await sql<TenantRow & { api_json: string }>`select * from tenants order by id`.execute(db);
    expect(stored.rows).toHaveLength(2);
    for (const row of stored.rows) expect(JSON.parse(row.api_json)).toEqual(presentTenant(row));
    // And rows written afterwards are rendered on the write.
    await sql`update tenants set name = 'Renamed', updated_at = now() where id = 'tnt_child'`.execute(db);
    const renamed = await sql<TenantRow & { api_json: string }>`select * from tenants where id = 'tnt_child'`.execute(db);
    expect(JSON.parse(renamed.rows[0]!.api_json)).toEqual(presentTenant(renamed.rows[0]!));
    expect(JSON.parse(renamed.rows[0]!.api_json).name).toBe('Renamed');
  });
});
