/**
 * A runner made ready for a run's turn: a lease (the one admitted with the send, else one from the
 * sandbox provider, waiting in line when the run holds for capacity), then the run's skills on it.
 * Whatever fails on the way leaves no runner claimed: a lease this module holds when it fails is
 * released as broken.
 */
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { type Metrics, secondsSince } from '../core/metrics.js';
import { ProblemError } from '../core/problems.js';
import { type AcquireRequest, CapacityExhausted, type Lease, type SandboxProvider, SandboxUnavailable } from '../sandboxes/provider.js';
import type { RunSkill } from '../skills/materialise.js';
import type { Db } from '../core/db/database.js';
import { BusyCapExhausted, busyCapProblem, waitForBusyPlace } from './busy-caps.js';
import { sandboxUnavailableProblem } from './run-problems.js';
import type { RunRequest } from './run-request.js';
import { platformLine, type RunStream } from './run-stream.js';

export interface ClaimDeps {
  db: Db;
  /** Settles when the next run of this node ends (a busy-sandbox place may have freed up). */
  runEnded: () => Promise<void>;
  provider: SandboxProvider;
  metrics: Metrics;
  maxHoldSeconds: number;
}

/**
 * The run's lease. A run held for a busy-sandbox place (its tenant's or user's cap) waits for one
 * first, then for a runner; both waits show in the stream as `queued` lines and share the maximum hold.
 */
export async function claimRunner(deps: ClaimDeps, request: RunRequest, stream: RunStream): Promise<Lease> {
  let queuedMs: number | undefined;
  const onQueued = (position: number, retryHint: number) => {
    queuedMs ??= performance.now();
    stream.append(platformLine('queued', { position, retry_hint_seconds: retryHint }));
  };
  const hold = AbortSignal.timeout(deps.maxHoldSeconds * 1000);
  try {
    if (request.busyPlace) await waitForBusyPlace(deps.db, request.busyPlace, { signal: hold, ended: deps.runEnded, onQueued });
    if (request.lease) return await request.lease;
    const lease = await deps.provider.acquire(sandboxFor(request.conversation, request.assistantMessageId, request.requestId), {
      wait: request.onCapacity === 'hold',
      signal: hold,
      onQueued,
    });
    if (queuedMs !== undefined) deps.metrics.holdEnded('served', secondsSince(queuedMs));
    return lease;
  } catch (error) {
    if (error instanceof CapacityExhausted) {
      deps.metrics.capacityRejected(request.onCapacity);
      if (queuedMs !== undefined) deps.metrics.holdEnded('timed-out', secondsSince(queuedMs));
    }
    throw error;
  }
}

/** The problem a run ends with when no runner could be claimed for it; undefined for a failure nobody expected. */
export function claimProblem(error: unknown, onCapacity: RunRequest['onCapacity']): ProblemError | undefined {
  if (error instanceof BusyCapExhausted) return busyCapProblem(error.cap, error.caps, 'hold');
  if (error instanceof CapacityExhausted) {
    return new ProblemError('capacity-exhausted', 429, {
      detail:
        onCapacity === 'hold'
          ? 'No sandbox became available within the maximum hold time.'
          : 'No sandbox is available; retry later or send with on_capacity=hold.',
      headers: { 'Retry-After': String(error.retryAfterSeconds) },
    });
  }
  return error instanceof SandboxUnavailable ? sandboxUnavailableProblem(error.reason) : undefined;
}

/**
 * Sends the run's skills to the runner (it writes them into its workspace) and has it offer exactly
 * those. A live session keeps offering the set it started with, so a held runner whose set differs
 * is recycled and a fresh one resumes the transcript with this run's set. The turn goes out right
 * behind the skills, unanswered (the runner starts a turn only once the workspace changes sent
 * before it are done, and never after one failed): `skillsDelivered` settles with their answer.
 */
export async function withSkills(
  deps: ClaimDeps,
  request: RunRequest,
  lease: Lease,
  loaded: Promise<RunSkill[]>,
): Promise<{ lease: Lease; skillsDelivered: Promise<void> }> {
  let current = lease;
  try {
    const skills = await loaded;
    const names = skills.map((skill) => skill.name);
    const offered = current.runner.sessionSkills;
    if (current.continuing && (offered?.length !== names.length || offered.some((name, i) => name !== names[i]))) {
      await deps.provider.release(current, { broken: true });
      current = await deps.provider.acquire(sandboxFor(request.conversation, request.assistantMessageId, request.requestId), {
        wait: true,
        signal: AbortSignal.timeout(deps.maxHoldSeconds * 1000),
      });
    }
    const skillsDelivered = current.runner.deliverSkills(skills);
    // Awaited after the turn; this only keeps a failure before then from counting as unhandled.
    skillsDelivered.catch(() => undefined);
    current.runner.offerSkills(names);
    return { lease: current, skillsDelivered };
  } catch (error) {
    await deps.provider.release(current, { broken: true });
    throw error;
  }
}

/** What the sandbox provider needs of a conversation to place its run (and the request that started it). */
export function sandboxFor(conversation: ScopedConversationRow, runId: string, requestId: string): AcquireRequest {
  return { agentType: conversation.agent_type, conversationId: conversation.id, tenantId: conversation.tenant_id, runId, requestId };
}
