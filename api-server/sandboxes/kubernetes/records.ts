/**
 * What the kubernetes provider keeps in the database, so that every API replica sees it: which run a
 * runner pod's egress credential stands for while a turn runs on it (the egress proxy of any replica
 * resolves it, not only that of the replica hosting the run), and a conversation's workspace between
 * its sandboxes. Fail-safe direction: a credential resolves only while its row names a run and the
 * token's digest matches; a row left by a replica that died names a run its heartbeat sweep has
 * already failed, which resolves to no secrets.
 */
import { createHash } from 'node:crypto';
import { constantTimeEqual } from '../../core/crypto.js';
import type { Db } from '../../core/db/database.js';
import type { AgentEvent, Runner, TurnOutcome, TurnRequest } from '../runner.js';

export interface RunnerRecords {
  /** From now until `clearEgress` (by the node that bound it last), the runner's egress credential stands for `runId`. */
  bindEgress(runnerId: string, egressToken: string, runId: string): Promise<void>;
  clearEgress(runnerId: string, runId: string): Promise<void>;
  /** The run a runner pod's egress credential stands for now, whichever replica hosts it. */
  egressRun(runnerId: string, egressToken: string): Promise<string | undefined>;
  /** The run a runner pod's credential stands for now, once the egress proxy has authenticated it. */
  runOf(runnerId: string): Promise<string | undefined>;
  saveWorkspace(conversationId: string, archive: Buffer): Promise<void>;
  loadWorkspace(conversationId: string): Promise<Buffer | undefined>;
}

const digest = (token: string) => createHash('sha256').update(token).digest();

export function databaseRunnerRecords(db: Db, nodeId: string, now: () => Date): RunnerRecords {
  return {
    async bindEgress(runnerId, egressToken, runId) {
      const row = { runner_id: runnerId, token_digest: digest(egressToken), run_id: runId, node_id: nodeId, updated_at: now() };
      await db
        .insertInto('runner_egress')
        .values(row)
        .onConflict((oc) =>
          oc
            .column('runner_id')
            .doUpdateSet({ token_digest: row.token_digest, run_id: runId, node_id: nodeId, updated_at: row.updated_at }),
        )
        .execute();
    },
    async clearEgress(runnerId, runId) {
      // Only this node's binding: the run may have been taken over by another, which bound it anew.
      await db
        .deleteFrom('runner_egress')
        .where('runner_id', '=', runnerId)
        .where('run_id', '=', runId)
        .where('node_id', '=', nodeId)
        .execute();
    },
    async egressRun(runnerId, egressToken) {
      const row = await db
        .selectFrom('runner_egress')
        .select(['token_digest', 'run_id'])
        .where('runner_id', '=', runnerId)
        .executeTakeFirst();
      if (!row) return undefined;
      return constantTimeEqual(row.token_digest, digest(egressToken)) ? row.run_id : undefined;
    },
    async runOf(runnerId) {
      const row = await db.selectFrom('runner_egress').select('run_id').where('runner_id', '=', runnerId).executeTakeFirst();
      return row?.run_id;
    },
    async saveWorkspace(conversationId, archive) {
      const row = { conversation_id: conversationId, archive, updated_at: now() };
      // The conversation may be gone meanwhile (deleted while its last turn ended): nothing to keep then.
      await db
        .insertInto('conversation_workspaces')
        .columns(['conversation_id', 'archive', 'updated_at'])
        .expression((eb) =>
          eb
            .selectFrom('conversations')
            .select([eb.val(conversationId).as('conversation_id'), eb.val(archive).as('archive'), eb.val(row.updated_at).as('updated_at')])
            .where('conversations.id', '=', conversationId),
        )
        .onConflict((oc) => oc.column('conversation_id').doUpdateSet({ archive, updated_at: row.updated_at }))
        .execute();
    },
    async loadWorkspace(conversationId) {
      const row = await db
        .selectFrom('conversation_workspaces')
        .select('archive')
        .where('conversation_id', '=', conversationId)
        .executeTakeFirst();
      return row?.archive;
    },
  };
}

/**
 * A runner whose turns record, for their duration, the run its egress credential stands for. The
 * provider may have written that binding already, for the run the runner was acquired for
 * (`boundFor`): that run's turn uses it, and a runner killed before any turn clears it.
 */
export class EgressRecordingRunner implements Runner {
  constructor(
    private readonly inner: Runner,
    private readonly records: RunnerRecords,
    private readonly egressToken: string,
    private boundFor?: string,
  ) {}

  get id(): string {
    return this.inner.id;
  }

  get alive(): boolean {
    return this.inner.alive;
  }

  get currentRunId(): string | undefined {
    return this.inner.currentRunId;
  }

  get currentRequestId(): string | undefined {
    return this.inner.currentRequestId;
  }

  get sessionSkills(): string[] | undefined {
    return this.inner.sessionSkills;
  }

  bindSessionStore(...args: Parameters<Runner['bindSessionStore']>): void {
    this.inner.bindSessionStore(...args);
  }

  offerSkills(names: string[]): void {
    this.inner.offerSkills(names);
  }

  async runTurn(turn: TurnRequest, onEvent: (event: AgentEvent) => void): Promise<TurnOutcome> {
    const { runId } = turn;
    const bound = this.boundFor;
    this.boundFor = undefined;
    if (runId && runId !== bound) await this.records.bindEgress(this.id, this.egressToken, runId);
    try {
      return await this.inner.runTurn(turn, onEvent);
    } finally {
      // A row left behind names a run that has ended: it resolves to no secrets (see egressRun's callers).
      if (runId) await this.records.clearEgress(this.id, runId).catch(() => undefined);
    }
  }

  /** The turn of a run taken over: its binding was written for it when the runner was, and is cleared at its end. */
  async continueTurn(...[turn, onEvent]: Parameters<Runner['continueTurn']>): Promise<TurnOutcome> {
    this.boundFor = undefined;
    try {
      return await this.inner.continueTurn(turn, onEvent);
    } finally {
      if (turn.runId) await this.records.clearEgress(this.id, turn.runId).catch(() => undefined);
    }
  }

  get position(): number {
    return this.inner.position;
  }

  settle(position: number): void {
    this.inner.settle(position);
  }

  settleAll(): void {
    this.inner.settleAll();
  }

  deliverSkills(...args: Parameters<Runner['deliverSkills']>): Promise<void> {
    return this.inner.deliverSkills(...args);
  }

  exportWorkspace(...args: Parameters<Runner['exportWorkspace']>): Promise<Buffer> {
    return this.inner.exportWorkspace(...args);
  }

  importWorkspace(archive: Buffer): Promise<void> {
    return this.inner.importWorkspace(archive);
  }

  async kill(): Promise<void> {
    const unused = this.boundFor;
    this.boundFor = undefined;
    await this.inner.kill();
    if (unused) await this.records.clearEgress(this.id, unused).catch(() => undefined);
  }
}
