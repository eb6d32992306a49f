import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import {
  Kysely,
  type Migration,
  type MigrationProvider,
  Migrator,
  type PostgresCursor,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
} from 'kysely';
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
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparedStatementPool(pool) }) });
    statementRunners.set(db, (sql, values) => runOnPool(pool, sql, values));
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  // Loaded lazily: the WASM build is only needed when no server is configured.
  const [{ PGlite }, { PGliteDialect }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('kysely-pglite-dialect'),
  ]);
  const dir = path.join(options.dataDir, 'pgdata');
  await mkdir(dir, { recursive: true });
  const client = await PGlite.create(dir);
  const db = new Kysely<Database>({ dialect: new PGliteDialect(client) });
  return { db, kind: 'pglite', close: () => db.destroy() };
}

/**
 * Runs every parameterised query as a named prepared statement (named by a hash of its SQL), so
 * PostgreSQL parses and plans each distinct query once per connection instead of on every call:
 * measured, this cut the database CPU of token exchange by two thirds. The cost is memory per
 * connection for each distinct SQL text, and it needs session pooling (not a transaction-mode
 * PgBouncer).
 *
 * Per query, the wrapper itself must stay near free: each pg client keeps one wrapper (kysely keys
 * its connection objects by it, so a fresh wrapper per checkout made a fresh kysely connection per
 * query), and statement names are remembered rather than hashed again on every call.
 */
function preparedStatementPool(pool: pg.Pool): PostgresPool {
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    const query = ((sql: string | PostgresCursor<unknown>, parameters?: ReadonlyArray<unknown>) => {
      if (typeof sql !== 'string') return client.query(sql as never);
      if (!parameters || parameters.length === 0) return client.query(sql, parameters as unknown[]);
      return preparedQuery(client, statementName(sql), sql, parameters as unknown[]);
    }) as unknown as PostgresPoolClient['query'];
    // pg-pool gives the client a new `release` at each checkout: call whichever it has now.
    return { query, release: () => client.release() };
  };
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = wrap(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/**
 * A named query, submitted as a `pg.Query`: a config object passed to `client.query` is copied
 * property by property (`Object.getOwnPropertyDescriptors`) on every call, about 1.5% of a token
 * exchange's server CPU; a Query built from the text alone skips that copy and is sent the same way.
 */
function preparedQuery(client: pg.PoolClient, name: string, text: string, values: unknown[]): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    const query = new pg.Query(text, values, (error, result) => {
      if (!error) return resolve(result as pg.QueryResult);
      // As pg does for its own promises: a stack that leads back to the query, not to the socket.
      Error.captureStackTrace(error);
      reject(error);
    });
    // The name makes it a prepared statement, as `{ name, text, values }` would.
    (query as pg.Query & { name: string }).name = name;
    client.query(query);
  });
}

/** Runs one parameterised statement, as a named prepared statement, on a connection of its own. */
export type StatementRunner = (sql: string, values: unknown[]) => Promise<unknown[]>;

const statementRunners = new WeakMap<Db, StatementRunner>();

/**
 * For a PostgreSQL database opened here, a way to run a compiled statement straight on its pool,
 * past kysely's executor (its connection provider, driver and connection wrappers and their awaits):
 * worth about a tenth of token exchange's server CPU. Undefined for anything else, a transaction
 * included (it is another object), which must go through kysely to run on its own connection.
 */
export function statementRunnerFor(db: Kysely<any>): StatementRunner | undefined {
  return statementRunners.get(db as Db);
}

async function runOnPool(pool: pg.Pool, sql: string, values: unknown[]): Promise<unknown[]> {
  const client = await pool.connect();
  try {
    return (await preparedQuery(client, statementName(sql), sql, values)).rows;
  } finally {
    client.release();
  }
}

/** Distinct SQL texts are few (queries are built from code); the bound only guards against a leak. */
const STATEMENT_NAMES_MAX = 5_000;
const statementNames = new Map<string, string>();

function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `acis_${createHash('sha1').update(sql).digest('hex')}`;
    if (statementNames.size >= STATEMENT_NAMES_MAX) statementNames.clear();
    statementNames.set(sql, name);
  }
  return name;
}

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
