import { createHash } from 'node:crypto';
import { Kysely, type PostgresCursor, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

/**
 * How queries reach PostgreSQL: every parameterised query as a named prepared statement, through
 * kysely or, for compiled queries on the database itself, straight on the pool.
 */

/** A kysely on `pool` whose parameterised queries run as prepared statements, with its statement runner. */
export function kyselyOnPool(pool: pg.Pool): Kysely<Database> {
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparedStatementPool(pool) }) });
  statementRunners.set(db, (sql, values) => runOnPool(pool, sql, values));
  return db;
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

const statementRunners = new WeakMap<object, StatementRunner>();

/**
 * For a kysely made by `kyselyOnPool`, a way to run a compiled statement straight on its pool, past
 * kysely's executor (its connection provider, driver and connection wrappers and their awaits): about
 * 8% of token exchange's server CPU. Undefined for anything else, a transaction
 * included (it is another object), which must go through kysely to run on its own connection.
 */
// biome-ignore lint/suspicious/noExplicitAny: a lookup keyed by the Kysely instance, whatever its schema (kysely's generic plumbing)
export function statementRunnerFor(db: Kysely<any>): StatementRunner | undefined {
  return statementRunners.get(db);
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
