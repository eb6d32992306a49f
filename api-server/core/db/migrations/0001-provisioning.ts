import { type Kysely, sql } from 'kysely';

// Ids use the C collation so that byte order (= time order of our ids) is the index order.
// One statement per query: PGlite's extended protocol takes a single command at a time.
const STATEMENTS = [
  `
    create table integrations (
      id text collate "C" primary key,
      name text not null,
      root_tenant_id text collate "C" not null,
      created_at timestamptz not null
    )
  `,
  `
    create table service_keys (
      id text collate "C" primary key,
      integration_id text collate "C" not null references integrations (id) on delete cascade,
      key_hash text not null unique,
      hint text not null,
      created_at timestamptz not null,
      revoked_at timestamptz
    )
  `,
  `
    create table credentials (
      id text collate "C" primary key,
      integration_id text collate "C" not null references integrations (id) on delete cascade,
      name text not null,
      type text not null,
      secret_ciphertext text not null,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (integration_id, name)
    )
  `,
  `
    create index credentials_list on credentials (integration_id, id)
  `,
  `
    create table repositories (
      id text collate "C" primary key,
      integration_id text collate "C" not null references integrations (id) on delete cascade,
      name text not null,
      repo_url text not null,
      branch text not null,
      provider text not null,
      credential_id text collate "C" references credentials (id),
      sync_state text not null,
      sync_last_synced_at timestamptz,
      sync_error text,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (integration_id, name)
    )
  `,
  `
    create index repositories_list on repositories (integration_id, id)
  `,
  `
    create index repositories_credential on repositories (credential_id)
  `,
  `
    create table skills (
      id text collate "C" primary key,
      repository_id text collate "C" not null references repositories (id) on delete cascade,
      name text not null,
      description text,
      version text,
      path text,
      source text not null,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (repository_id, name)
    )
  `,
  `
    create index skills_list on skills (repository_id, id)
  `,
  `
    create table tenants (
      id text collate "C" primary key,
      integration_id text collate "C" not null references integrations (id) on delete cascade,
      parent_id text collate "C" references tenants (id) on delete cascade,
      external_id text,
      name text,
      status text not null,
      repository_id text collate "C" references repositories (id),
      settings jsonb not null,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (integration_id, external_id)
    )
  `,
  `
    create index tenants_list on tenants (integration_id, id)
  `,
  `
    create index tenants_list_status on tenants (integration_id, status, id)
  `,
  `
    create index tenants_parent on tenants (parent_id)
  `,
  `
    create index tenants_repository on tenants (repository_id)
  `,
  `
    create table roles (
      id text collate "C" primary key,
      tenant_id text collate "C" not null references tenants (id) on delete cascade,
      name text not null,
      description text,
      skill_access jsonb not null,
      repository_id text collate "C" references repositories (id),
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (tenant_id, name)
    )
  `,
  `
    create index roles_list on roles (tenant_id, id)
  `,
  `
    create index roles_repository on roles (repository_id)
  `,
  `
    create table users (
      id text collate "C" primary key,
      tenant_id text collate "C" not null references tenants (id) on delete cascade,
      external_id text not null,
      email text,
      display_name text,
      status text not null,
      role_id text collate "C" references roles (id),
      storage jsonb not null,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (tenant_id, external_id)
    )
  `,
  `
    create index users_list on users (tenant_id, id)
  `,
  `
    create index users_role on users (role_id)
  `,
  `
    create table approver_keys (
      id text collate "C" primary key,
      tenant_id text collate "C" not null references tenants (id) on delete cascade,
      algorithm text not null,
      secret_ciphertext text,
      public_key text,
      created_at timestamptz not null,
      revoked_at timestamptz
    )
  `,
  `
    create index approver_keys_tenant on approver_keys (tenant_id)
  `,
  `
    create table idempotency_keys (
      principal text not null,
      operation text not null,
      key text not null,
      request_hash text not null,
      state text not null,
      response_status integer,
      response_body jsonb,
      response_headers jsonb,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      primary key (principal, operation, key)
    )
  `,
  `
    create index idempotency_keys_expiry on idempotency_keys (expires_at)
  `,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table idempotency_keys, approver_keys, users, roles, tenants, skills, repositories, credentials, service_keys, integrations`.execute(
    db,
  );
}
