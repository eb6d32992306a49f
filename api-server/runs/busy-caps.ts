/**
 * Caps on the sandboxes a tenant, and one user of it, keep busy at once, so that no tenant starves
 * the others of the nodes' (or the cluster's) capacity. A busy sandbox is a run in progress that
 * holds a place: an assistant message `in_progress` with `sandbox_admitted`. The count lives in
 * PostgreSQL, so every API node sees the same figure; whoever counts first takes the tenant's
 * transaction-scoped advisory lock, so two sends that race (on one node or on two) cannot both
 * pass the last place. A place is given back when the message leaves `in_progress`, which also
 * happens to the runs of a node that died (nodes.ts), so a crash leaks no place.
 *
 * Over a cap, a send is answered as a full cluster answers it: 429 `capacity-exhausted` with
 * `Retry-After` before anything is stored (on_capacity=reject), or `queued` lines until a place
 * frees up or the maximum hold time has passed (on_capacity=hold).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Db } from '../core/db/database.js';
import { ProblemError } from '../core/problems.js';
import { type BusyCaps, busyCapReached, retryHintSeconds } from '../../sandbox-policy/policy.js';
import { CapacityExhausted } from '../sandboxes/provider.js';

/** A held run's caps stayed reached for the maximum hold time. */
export class BusyCapExhausted extends CapacityExhausted {
  constructor(
    readonly cap: 'tenant' | 'user',
    readonly caps: BusyCaps,
    retryAfterSeconds: number,
  ) {
    super(retryAfterSeconds);
  }
}

/** What a held run is counted by, and against. */
export interface BusyPlaceRequest {
  messageId: string;
  tenantId: string;
  userId: string;
  caps: BusyCaps;
}

/** A held run waits at most this long before it counts again, for places freed on other nodes. */
const RECHECK_MS = 1_000;
const TYPICAL_TURN_SECONDS = 5;

export function capped(caps: BusyCaps): boolean {
  return caps.tenant !== undefined || caps.user !== undefined;
}

/**
 * Locks the tenant's places until `trx` ends and says which cap one more busy sandbox would pass
 * (undefined: it fits). `trx` must be a transaction, or the lock is gone before the caller writes.
 */
export async function lockAndCheckBusy(trx: Db, tenantId: string, userId: string, caps: BusyCaps): Promise<'tenant' | 'user' | undefined> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`acis.busy-sandboxes:${tenantId}`}, 0))`.execute(trx);
  return checkBusy(trx, tenantId, userId, caps);
}

/** As `lockAndCheckBusy` without the lock: an early answer that a send will not fit, before a runner is readied for it. */
export async function checkBusy(db: Db, tenantId: string, userId: string, caps: BusyCaps): Promise<'tenant' | 'user' | undefined> {
  const busy = await db
    .selectFrom('messages')
    .innerJoin('conversations', 'conversations.id', 'messages.conversation_id')
    .select([sql<string>`count(*)`.as('tenant'), sql<string>`count(*) filter (where conversations.user_id = ${userId})`.as('user')])
    .where('messages.role', '=', 'assistant')
    .where('messages.status', '=', 'in_progress')
    .where('messages.sandbox_admitted', '=', true)
    .where('conversations.tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return busyCapReached({ tenant: Number(busy.tenant), user: Number(busy.user) }, caps);
}

/** The answer to a send over a cap with on_capacity=reject (the run's `error` line, when held past the maximum hold time). */
export function busyCapProblem(cap: 'tenant' | 'user', caps: BusyCaps, onCapacity: 'reject' | 'hold'): ProblemError {
  const which =
    cap === 'tenant'
      ? `The tenant's cap on sandboxes busy at once (${caps.tenant})`
      : `The user's cap on sandboxes busy at once (${caps.user})`;
  return new ProblemError('capacity-exhausted', 429, {
    detail:
      onCapacity === 'hold'
        ? `${which} stayed reached for the maximum hold time.`
        : `${which} is reached; retry once a run has ended, or send with on_capacity=hold.`,
    headers: { 'Retry-After': String(retryHintSeconds(1, TYPICAL_TURN_SECONDS)) },
  });
}

/**
 * Waits for a held run's place: counts again whenever `ended` says a run ended on this node, and
 * every second for runs that end elsewhere; each change of its position in the tenant's line shows
 * as a `queued` line. Rejects with CapacityExhausted when `signal` (the maximum hold) aborts first.
 */
export async function waitForBusyPlace(
  db: Db,
  request: BusyPlaceRequest,
  options: { signal: AbortSignal; ended: () => Promise<void>; onQueued: (position: number, retryHint: number) => void },
): Promise<void> {
  let shown: number | undefined;
  for (;;) {
    const over = await tryTakeBusyPlace(db, request);
    if (!over) return;
    if (options.signal.aborted) throw new BusyCapExhausted(over, request.caps, retryHintSeconds(shown ?? 1, TYPICAL_TURN_SECONDS));
    const position = await waitingPosition(db, request);
    if (position !== shown) {
      shown = position;
      options.onQueued(position, retryHintSeconds(position, TYPICAL_TURN_SECONDS));
    }
    await Promise.race([options.ended(), sleep(RECHECK_MS, undefined, { signal: options.signal }).catch(() => undefined)]);
  }
}

/** Gives the held run its place if both caps leave one; else says which cap is reached. */
async function tryTakeBusyPlace(db: Db, request: BusyPlaceRequest): Promise<'tenant' | 'user' | undefined> {
  return db.transaction().execute(async (trx) => {
    const over = await lockAndCheckBusy(trx, request.tenantId, request.userId, request.caps);
    if (!over) await trx.updateTable('messages').set({ sandbox_admitted: true }).where('id', '=', request.messageId).execute();
    return over;
  });
}

/** 1 for the tenant's oldest held run; ids are time-ordered. */
async function waitingPosition(db: Db, request: BusyPlaceRequest): Promise<number> {
  const row = await db
    .selectFrom('messages')
    .innerJoin('conversations', 'conversations.id', 'messages.conversation_id')
    .select(sql<string>`count(*)`.as('ahead'))
    .where('messages.role', '=', 'assistant')
    .where('messages.status', '=', 'in_progress')
    .where('messages.sandbox_admitted', '=', false)
    .where('conversations.tenant_id', '=', request.tenantId)
    .where('messages.id', '<', request.messageId)
    .executeTakeFirstOrThrow();
  return Number(row.ahead) + 1;
}
