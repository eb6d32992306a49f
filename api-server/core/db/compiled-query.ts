import { type Compilable, type CompiledQuery, type Kysely, type QueryResult, RawNode } from 'kysely';
import type { Database } from './schema.js';
import { statementRunnerFor } from './prepared-statements.js';

type AnyDb = Kysely<Database>;

interface Template {
  sql: string;
  query: RawNode;
  /** Per parameter: the index of the call argument it takes, or the constant it keeps. */
  slots: Array<{ argument: number } | { constant: unknown }>;
}

/**
 * A query of fixed shape whose SQL is built and compiled once, at its first call; later calls only
 * bind their arguments. Kysely otherwise rebuilds the operation tree and compiles it on every call,
 * 5-17 µs for the hot provisioning lookups. `build` must use each argument only as a value (no
 * branching on it, no transformation), which the first call checks: it builds the query with marker
 * values and finds each of them among the compiled parameters. On the database itself it runs straight
 * on the pool (`statementRunnerFor`); in a transaction, through kysely on the transaction's connection.
 */
export function compiledOnce<Args extends unknown[], Row>(
  build: (db: AnyDb, ...args: Args) => Compilable<Row>,
): (db: AnyDb, ...args: Args) => Promise<Row[]> {
  let template: Template | undefined;
  return async (db, ...args) => {
    template ??= compileTemplate(db, build, args.length);
    const parameters = template.slots.map((slot) => ('argument' in slot ? args[slot.argument] : slot.constant));
    const run = statementRunnerFor(db);
    if (run) return (await run(template.sql, parameters)) as Row[];
    const compiled: CompiledQuery<Row> = { sql: template.sql, query: template.query, parameters, queryId: QUERY_ID };
    const result: QueryResult<Row> = await db.executeQuery(compiled);
    return result.rows;
  };
}

/** Only plugins read a query id, and none is installed. */
const QUERY_ID = { queryId: 'compiled-once' };

function compileTemplate<Args extends unknown[], Row>(
  db: AnyDb,
  build: (db: AnyDb, ...args: Args) => Compilable<Row>,
  arity: number,
): Template {
  const markers = Array.from({ length: arity }, (_, index) => `\u0000Compiled-Once-Argument-${index}\u0000`);
  // Markers are strings whatever an argument's type: kysely only carries values it binds.
  const compiled = build(db, ...(markers as unknown as Args)).compile();
  const slots = compiled.parameters.map((parameter) => {
    const argument = markers.indexOf(parameter as string);
    return argument >= 0 ? { argument } : { constant: parameter };
  });
  markers.forEach((marker, index) => {
    if (!compiled.parameters.includes(marker)) throw new Error(`compiledOnce: argument ${index} is not used as a query value`);
  });
  return { sql: compiled.sql, query: RawNode.createWithSql(compiled.sql), slots };
}
