import { type Selectable, sql } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { SecretScope, SecretsTable } from '../core/db/schema.js';
import type { Page, PageRequest } from '../core/pagination.js';

export type SecretListRow = Pick<Selectable<SecretsTable>, 'alias' | 'allowed_hosts' | 'created_at' | 'updated_at'>;

/** Data access for vaulted secrets. Values go in and out as ciphertext only; the service encrypts. */

export interface Owner {
  scope: SecretScope;
  id: string;
}

/** Merge-upsert per alias: given aliases are inserted or overwritten, the owner's others stay. */
export async function upsertSecrets(
  db: Db,
  owner: Owner,
  values: { alias: string; value_ciphertext: string; allowed_hosts: string[] | null }[],
  now: Date,
): Promise<void> {
  await db
    .insertInto('secrets')
    .values(values.map((v) => ({ scope: owner.scope, scope_id: owner.id, ...v, created_at: now, updated_at: now })))
    .onConflict((oc) =>
      oc.columns(['scope', 'scope_id', 'alias']).doUpdateSet((eb) => ({
        value_ciphertext: eb.ref('excluded.value_ciphertext'),
        allowed_hosts: eb.ref('excluded.allowed_hosts'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .execute();
}

function ownerSecrets(db: Db, owner: Owner) {
  return db
    .selectFrom('secrets')
    .select(['alias', 'allowed_hosts', 'created_at', 'updated_at'])
    .where('scope', '=', owner.scope)
    .where('scope_id', '=', owner.id);
}

export function listAllSecrets(db: Db, owner: Owner): Promise<SecretListRow[]> {
  return ownerSecrets(db, owner).orderBy('alias').execute();
}

/**
 * Keyset pagination by alias, A to Z (an owner's aliases are unique, and a listing of names reads
 * best in order): `starting_after` walks on, `ending_before` back; one extra row tells `has_more`
 * in the direction of travel, and `next_cursor` is the last alias of the page.
 */
export async function pageSecrets(db: Db, owner: Owner, page: PageRequest): Promise<Page<SecretListRow>> {
  const query = ownerSecrets(db, owner);
  let rows: SecretListRow[];
  if (page.ending_before) {
    rows = await query
      .where('alias', '<', page.ending_before)
      .orderBy('alias', 'desc')
      .limit(page.limit + 1)
      .execute();
    const hasMore = rows.length > page.limit;
    return envelope(rows.slice(0, page.limit).reverse(), hasMore);
  }
  const onward = page.starting_after ? query.where('alias', '>', page.starting_after) : query;
  rows = await onward
    .orderBy('alias', 'asc')
    .limit(page.limit + 1)
    .execute();
  return envelope(rows.slice(0, page.limit), rows.length > page.limit);
}

function envelope(rows: SecretListRow[], hasMore: boolean): Page<SecretListRow> {
  return { object: 'list', data: rows, has_more: hasMore, next_cursor: hasMore ? (rows.at(-1)?.alias ?? null) : null };
}

export async function deleteSecret(db: Db, owner: Owner, alias: string): Promise<boolean> {
  const result = await db
    .deleteFrom('secrets')
    .where('scope', '=', owner.scope)
    .where('scope_id', '=', owner.id)
    .where('alias', '=', alias)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export async function deleteRunSecrets(db: Db, runId: string): Promise<void> {
  await db.deleteFrom('secrets').where('scope', '=', 'run').where('scope_id', '=', runId).execute();
}

/** Run-scoped values of runs no longer in progress (their process stopped before it could delete them). */
export async function sweepEndedRunSecrets(db: Db): Promise<number> {
  const result = await db
    .deleteFrom('secrets')
    .where('scope', '=', 'run')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('messages')
            .select('messages.id')
            .whereRef('messages.id', '=', 'secrets.scope_id')
            .where('messages.status', '=', 'in_progress'),
        ),
      ),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export interface RankedSecretRow {
  scope: SecretScope;
  scope_id: string;
  alias: string;
  value_ciphertext: string;
  allowed_hosts: string[] | null;
  /** Lower wins: 0 run, 1 conversation, 2 user, 3 the tenant, 4 its parent, and so on up to the root. */
  rank: number;
}

/**
 * Every secret visible to a run of the conversation, at every scope, ranked by precedence. The
 * tenant scope includes the tenant's ancestors, nearest first (as a repository is inherited).
 */
export async function selectVisibleSecrets(
  db: Db,
  scopes: { runId: string | undefined; conversationId: string; userId: string; tenantId: string },
): Promise<RankedSecretRow[]> {
  const result = await sql<RankedSecretRow>`
    with recursive chain (id, parent_id, depth) as (
      select id, parent_id, 0 from tenants where id = ${scopes.tenantId}
      union all
      select t.id, t.parent_id, chain.depth + 1 from tenants t join chain on t.id = chain.parent_id
    )
    select scope, scope_id, alias, value_ciphertext, allowed_hosts, 0 as rank from secrets
      where scope = 'run' and scope_id = ${scopes.runId ?? null}
    union all
    select scope, scope_id, alias, value_ciphertext, allowed_hosts, 1 from secrets
      where scope = 'conversation' and scope_id = ${scopes.conversationId}
    union all
    select scope, scope_id, alias, value_ciphertext, allowed_hosts, 2 from secrets
      where scope = 'user' and scope_id = ${scopes.userId}
    union all
    select s.scope, s.scope_id, s.alias, s.value_ciphertext, s.allowed_hosts, 3 + chain.depth from chain
      join secrets s on s.scope = 'tenant' and s.scope_id = chain.id
  `.execute(db);
  return result.rows;
}
