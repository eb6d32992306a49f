import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Kysely, type Migration, type MigrationProvider, Migrator } from 'kysely';
import pg from 'pg';
import * as provisioning from './migrations/0001-provisioning.js';
import * as conversations from './migrations/0002-conversations.js';
import * as secrets from './migrations/0003-secrets.js';
import * as repositorySync from './migrations/0004-repository-sync.js';
import * as approvals from './migrations/0005-approvals.js';
import * as rateLimits from './migrations/0006-rate-limits.js';
import * as skillContent from './migrations/0007-skill-content.js';
import * as githubWebhooks from './migrations/0008-github-webhooks.js';
import * as kubernetesRunners from './migrations/0009-kubernetes-runners.js';
import * as tenantApiJson from './migrations/0010-tenant-api-json.js';
import * as tenantPage from './migrations/0011-tenant-page.js';
import * as webhookBodyDigest from './migrations/0012-webhook-body-digest.js';
import * as secretAllowedHosts from './migrations/0013-secret-allowed-hosts.js';
import * as busySandboxCaps from './migrations/0014-busy-sandbox-caps.js';
import * as messageRequestId from './migrations/0015-message-request-id.js';
import * as repositorySshHostKeys from './migrations/0016-repository-ssh-host-keys.js';
import * as runLineOrigin from './migrations/0017-run-line-origin.js';
import { kyselyOnPool } from './prepared-statements.js';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;

/**
 * Migrations are listed here (not read from disk), so the compiled build and tsx see the same set.
 * Exported for tests that start from an older schema.
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001-provisioning': provisioning,
  '0002-conversations': conversations,
  '0003-secrets': secrets,
  '0004-repository-sync': repositorySync,
  '0005-approvals': approvals,
  '0006-rate-limits': rateLimits,
  '0007-skill-content': skillContent,
  '0008-github-webhooks': githubWebhooks,
  '0009-kubernetes-runners': kubernetesRunners,
  '0010-tenant-api-json': tenantApiJson,
  '0011-tenant-page': tenantPage,
  '0012-webhook-body-digest': webhookBodyDigest,
  '0013-secret-allowed-hosts': secretAllowedHosts,
  '0014-busy-sandbox-caps': busySandboxCaps,
  '0015-message-request-id': messageRequestId,
  '0016-repository-ssh-host-keys': repositorySshHostKeys,
  '0017-run-line-origin': runLineOrigin,
};

const migrationProvider: MigrationProvider = { getMigrations: async () => MIGRATIONS };

export interface DatabaseOptions {
  /** PostgreSQL connection string; absent: embedded PGlite under `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  poolSize: number;
}

export interface DatabaseHandle {
  db: Db;
  kind: 'postgres' | 'pglite';
  close(): Promise<void>;
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) {
    const db = kyselyOnPool(new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize }));
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  // Loaded lazily: the WASM build is only needed when no server is configured.
  const [{ PGlite }, { PGliteDialect }] = await Promise.all([import('@electric-sql/pglite'), import('kysely-pglite-dialect')]);
  const dir = path.join(options.dataDir, 'pgdata');
  await mkdir(dir, { recursive: true });
  const client = await PGlite.create(dir);
  const db = new Kysely<Database>({ dialect: new PGliteDialect(client) });
  return { db, kind: 'pglite', close: () => db.destroy() };
}

// biome-ignore lint/suspicious/noExplicitAny: migrations run against any schema (they take Kysely<any>), not the app's typed one
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Serialise a value for a jsonb column (see `Json<T>` in schema.ts). */
export function json(value: unknown): string {
  return JSON.stringify(value);
}

const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === UNIQUE_VIOLATION;
}

export function isForeignKeyViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === FOREIGN_KEY_VIOLATION;
}
