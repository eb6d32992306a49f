import type { Logger } from 'pino';
import { sql } from 'kysely';
import { ChannelListener } from '../core/db/channel-listener.js';
import type { Db } from '../core/db/database.js';
import type { Metrics } from '../core/metrics.js';
import { type ApprovalRow, expireDueApprovals, findApproval } from './approvals.repository.js';

/** The Postgres channel on which any node announces that an approval left `pending`. */
export const APPROVAL_CHANNEL = 'acis_approvals';
/** A parked run re-reads its approval this often even without a signal (a lost notification, a reconnect). */
const RECHECK_MS = 10_000;

/** How a wait ended: the approval was decided (or expired), it vanished with its conversation, or the waiter gave up. */
export type ApprovalWait = { kind: 'decided'; approval: ApprovalRow } | { kind: 'gone' } | { kind: 'ended' };

export interface ApprovalGateDeps {
  db: Db;
  logger: Logger;
  now: () => Date;
  /** PostgreSQL connection string for the LISTEN connection; undefined on the embedded database (one node). */
  databaseUrl: string | undefined;
  metrics: Metrics;
}

/**
 * Where runs of this node wait on their approvals. The decision is always read from the database
 * (the one source of truth); signals only say when to read: a resolution on this node wakes the
 * waiter at once, one on another node arrives through `LISTEN/NOTIFY`, and a periodic re-read
 * covers a notification lost while the LISTEN connection was down.
 */
export class ApprovalGate {
  private readonly waiters = new Map<string, Set<(row: ApprovalRow | undefined) => void>>();
  private readonly listener: ChannelListener | undefined;

  constructor(private readonly deps: ApprovalGateDeps) {
    this.listener =
      deps.databaseUrl === undefined
        ? undefined
        : new ChannelListener({
            databaseUrl: deps.databaseUrl,
            channel: APPROVAL_CHANNEL,
            logger: deps.logger,
            name: 'approval signal',
            onNotification: (approvalId) => void this.check(approvalId),
            // Whatever was decided while no connection listened is picked up now.
            onListening: () => {
              for (const approvalId of this.waiters.keys()) void this.check(approvalId);
            },
          });
  }

  async start(): Promise<void> {
    await this.listener?.start();
  }

  async stop(): Promise<void> {
    await this.listener?.stop();
  }

  /** Resolves once the approval is no longer pending or no longer exists, or with `ended` when `signal` aborts first. */
  wait(approvalId: string, signal: AbortSignal): Promise<ApprovalWait> {
    return new Promise((resolve) => {
      const waiters = this.waiters.get(approvalId) ?? new Set();
      this.waiters.set(approvalId, waiters);
      const recheck = setInterval(() => void this.check(approvalId), RECHECK_MS);
      const finish = (outcome: ApprovalWait) => {
        clearInterval(recheck);
        signal.removeEventListener('abort', onAbort);
        waiters.delete(done);
        if (waiters.size === 0) this.waiters.delete(approvalId);
        resolve(outcome);
      };
      const done = (row: ApprovalRow | undefined) => finish(row ? { kind: 'decided', approval: row } : { kind: 'gone' });
      const onAbort = () => finish({ kind: 'ended' });
      if (signal.aborted) return finish({ kind: 'ended' });
      waiters.add(done);
      signal.addEventListener('abort', onAbort, { once: true });
      // It may have been decided between being raised and this wait beginning.
      void this.check(approvalId);
    });
  }

  /** Tells every node that the approval changed state: this one at once, the others through NOTIFY. */
  async announce(approvalId: string): Promise<void> {
    await this.check(approvalId);
    if (this.deps.databaseUrl) await sql`select pg_notify(${APPROVAL_CHANNEL}, ${approvalId})`.execute(this.deps.db);
  }

  /** Expires every pending approval past its deadline (whichever node hosts its run) and announces each. */
  async expireDue(): Promise<number> {
    const expired = await expireDueApprovals(this.deps.db, this.deps.now());
    if (expired.length > 0) this.deps.metrics.approvalResolved('expired', expired.length);
    for (const row of expired) await this.announce(row.id);
    return expired.length;
  }

  private async check(approvalId: string): Promise<void> {
    if (!this.waiters.has(approvalId)) return;
    try {
      // No row: deleted with its conversation (or tenant), so nothing will ever decide it.
      const row = await findApproval(this.deps.db, approvalId);
      if (row?.status === 'pending') return;
      for (const wake of [...(this.waiters.get(approvalId) ?? [])]) wake(row);
    } catch (err) {
      this.deps.logger.warn({ err, approval_id: approvalId }, 'reading an approval failed');
    }
  }
}
