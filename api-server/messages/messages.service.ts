import type { z } from 'zod';
import { type Db, isUniqueViolation, json } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal, UserPrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { assertConversationActive, assertTenantWritable, getConversationInScope } from '../conversations/conversations.service.js';
import { fillerEnabled } from '../runs/filler.js';
import { sandboxUnavailableProblem, shuttingDownProblem } from '../runs/run-problems.js';
import type { RunOutcome } from '../runs/run-request.js';
import type { RunStream, StreamLine } from '../runs/run-stream.js';
import { sandboxFor } from '../runs/runner-claim.js';
import { busyCapProblem, capped, checkBusy, lockAndCheckBusy } from '../runs/busy-caps.js';
import { type BusyCaps, effectiveBusyCaps } from '../../sandbox-policy/policy.js';
import { type Admission, CapacityExhausted } from '../sandboxes/provider.js';
import { assertSecretsBound, missingSecretProblem, resolveRunSecrets, vaultRunSecrets } from '../secrets/secrets.service.js';
import { effectiveSkillIds } from '../skills/materialise.js';
import { findRunInFlight, selectMessages } from './messages.repository.js';
import type { SendMessageBody } from './messages.schemas.js';

type Caller = ServicePrincipal | UserPrincipal;
export type SendBody = z.output<typeof SendMessageBody>;

const TITLE_LENGTH = 80;

export function conversationBusy(): ProblemError {
  return new ProblemError('conversation-busy', 409, {
    detail: 'A run is in flight on this conversation; wait for its terminal line before sending another message.',
  });
}

/**
 * Checks a send can start: tenant writable, conversation active, skill narrowing within the effective
 * set. `bodyPointer` locates the message in the request body (`/initial_message` on create and upsert).
 */
export function checkSend(conversation: ScopedConversationRow, body: SendBody, bodyPointer = ''): void {
  assertTenantWritable(conversation.tenant_status);
  assertConversationActive(conversation);
  if (body.skill_ids) {
    const effective = new Set(conversation.selected_skill_ids ?? conversation.context.skill_ids);
    const errors = body.skill_ids
      .map((id, index) => ({ id, index }))
      .filter(({ id }) => !effective.has(id))
      .map(({ index }) => ({ pointer: `${bodyPointer}/skill_ids/${index}`, message: "not among the conversation's effective skills" }));
    if (errors.length > 0) throw problems.invalid(errors);
  }
}

export interface StartedRun {
  userMessageId: string;
  assistantMessageId: string;
  stream: RunStream;
  done: Promise<RunOutcome>;
}

/**
 * Appends the user's message and starts the agent run. With `on_capacity=reject` a place for the run
 * is taken first, so a full node (or cluster) answers 429 before anything is stored or streamed; the
 * messages are stored while the runner gets ready behind that admission, and a runner that then
 * cannot be had ends the run failed with an `error` line, as any failure after the insert does.
 *
 * A placeholder naming an alias the run cannot resolve (missing-secret) claims no runner and runs
 * nothing: both messages are stored, the assistant's `failed`, and the run ends at once with the
 * problem (an `error` line, or 422 with stream=false), like any platform abort. So does a node
 * that cannot start runners at all (sandbox-unavailable, 503), rather than leave the turn waiting.
 */
export async function startMessageRun(
  deps: AppDeps,
  conversation: ScopedConversationRow,
  body: SendBody,
  context: { onCapacity: 'reject' | 'hold'; leadingLines: StreamLine[]; baseUrl: string; requestId: string; bodyPointer?: string },
): Promise<StartedRun> {
  if (!deps.runtime.runs.accepting) throw shuttingDownProblem();
  checkSend(conversation, body, context.bodyPointer);
  assertSecretsBound(deps, body.secrets, `${context.bodyPointer ?? ''}/secrets`);
  // The message's own values stand in for the run scope until the run exists to vault them under.
  const [inFlight, secrets] = await Promise.all([
    findRunInFlight(deps.db, conversation.id),
    resolveRunSecrets(deps, { runId: undefined, conversation }, body.secrets),
  ]);
  if (inFlight) throw conversationBusy();
  const unavailable = deps.runtime.provider.unavailableReason;
  const refusal =
    missingSecretProblem(body, secrets, context.bodyPointer) ?? (unavailable ? sandboxUnavailableProblem(unavailable) : undefined);

  // A refused run runs nothing, so it takes no place either.
  const caps = refusal ? undefined : busyCapsOf(deps, conversation);
  if (caps && context.onCapacity === 'reject') await refuseEarlyOverBusyCap(deps, conversation, caps);

  // Named before the admission: the runner being readied for the run may be told which run it serves.
  const ids = { userMessageId: deps.newId('message'), assistantMessageId: deps.newId('message') };
  let admission: Admission | undefined;
  if (context.onCapacity === 'reject' && !refusal) {
    try {
      admission = await deps.runtime.provider.admit(sandboxFor(conversation, ids.assistantMessageId, context.requestId), { wait: false });
    } catch (error) {
      if (!(error instanceof CapacityExhausted)) throw error;
      deps.metrics.capacityRejected('reject');
      throw new ProblemError('capacity-exhausted', 429, {
        detail: 'No sandbox is available; retry later or send with on_capacity=hold.',
        headers: { 'Retry-After': String(error.retryAfterSeconds) },
      });
    }
  }

  let inserted: Inserted;
  try {
    inserted = await insertTurnMessages(deps, conversation, { ...ids, requestId: context.requestId }, body, {
      vaultSecrets: !refusal,
      caps,
      onCapacity: context.onCapacity,
    });
  } catch (error) {
    await releaseAdmission(deps, admission);
    if (isUniqueViolation(error)) throw conversationBusy();
    throw error;
  }
  if (inserted.refused && caps) {
    await releaseAdmission(deps, admission);
    throw refuseOverBusyCap(deps, inserted.refused, caps);
  }
  const { stream, done } = deps.runtime.runs.start({
    conversation,
    assistantMessageId: ids.assistantMessageId,
    content: body.content,
    env: body.env,
    onCapacity: context.onCapacity,
    lease: admission?.lease,
    busyPlace:
      inserted.admitted || !caps
        ? undefined
        : { messageId: ids.assistantMessageId, tenantId: conversation.tenant_id, userId: conversation.user_id, caps },
    leadingLines: context.leadingLines,
    filler: fillerEnabled(body.filler?.enabled, conversation.filler?.enabled, conversation.tenant_settings.filler_enabled),
    baseUrl: context.baseUrl,
    requestId: context.requestId,
    secrets,
    refusal,
    skillIds: effectiveSkillIds(conversation, body.skill_ids),
  });
  return { ...ids, stream, done };
}

/** The tenant's caps on busy sandboxes; undefined when none applies (nothing to count or lock). */
function busyCapsOf(deps: AppDeps, conversation: ScopedConversationRow): BusyCaps | undefined {
  const caps = effectiveBusyCaps(conversation.tenant_settings, deps.config.busySandboxDefaults);
  return capped(caps) ? caps : undefined;
}

/** Before a runner is readied for a send that cannot pass its caps; the count that decides is taken under the lock, on insert. */
async function refuseEarlyOverBusyCap(deps: AppDeps, conversation: ScopedConversationRow, caps: BusyCaps): Promise<void> {
  const over = await checkBusy(deps.db, conversation.tenant_id, conversation.user_id, caps);
  if (over) throw refuseOverBusyCap(deps, over, caps);
}

function refuseOverBusyCap(deps: AppDeps, cap: 'tenant' | 'user', caps: BusyCaps): ProblemError {
  deps.metrics.capacityRejected('reject');
  return busyCapProblem(cap, caps, 'reject');
}

async function releaseAdmission(deps: AppDeps, admission: Admission | undefined): Promise<void> {
  await admission?.lease.then(
    (lease) => deps.runtime.provider.release(lease, {}),
    () => undefined,
  );
}

/** Whether the run holds a busy-sandbox place, or (on_capacity=reject) the cap that refused it, nothing stored. */
type Inserted = { admitted: boolean; refused?: 'tenant' | 'user' | undefined };

/**
 * The user message and the in-progress assistant message with the conversation's counters, in one
 * statement (one round trip on the way to the runner). In a transaction when the message's `secrets`
 * are vaulted with it (for the run alone), or when the tenant's caps on busy sandboxes apply: then
 * the tenant's places are locked and counted first, and a run over a cap is stored held
 * (on_capacity=hold, it waits for a place) or not at all (reject).
 */
async function insertTurnMessages(
  deps: AppDeps,
  conversation: ScopedConversationRow,
  { userMessageId, assistantMessageId, requestId }: { userMessageId: string; assistantMessageId: string; requestId: string },
  body: SendBody,
  options: { vaultSecrets: boolean; caps: BusyCaps | undefined; onCapacity: 'reject' | 'hold' },
): Promise<Inserted> {
  const now = deps.now();
  const common = {
    conversation_id: conversation.id,
    skill_ids: body.skill_ids ? json(body.skill_ids) : null,
    env: body.env ? json(body.env) : null,
    metadata: json(body.metadata ?? {}),
    request_id: requestId,
    created_at: now,
    updated_at: now,
  };
  const rows = (admitted: boolean) => [
    {
      ...common,
      id: userMessageId,
      role: 'user' as const,
      content: body.content,
      parts: body.parts ? json(body.parts) : null,
      status: 'completed' as const,
      usage: null,
      node_id: null,
    },
    {
      ...common,
      id: assistantMessageId,
      role: 'assistant' as const,
      content: '',
      parts: null,
      status: 'in_progress' as const,
      usage: null,
      node_id: deps.runtime.nodeId,
      sandbox_admitted: admitted,
    },
  ];
  const store = (db: Db, admitted: boolean) =>
    db
      .with('turn_messages', (q) => q.insertInto('messages').values(rows(admitted)))
      .updateTable('conversations')
      .set((eb) => ({
        message_count: eb('message_count', '+', 2),
        last_message_at: now,
        updated_at: now,
        title: eb.fn.coalesce('title', eb.val(titleFrom(body.content))),
      }))
      .where('id', '=', conversation.id)
      .execute();
  const { caps } = options;
  const secrets = options.vaultSecrets ? body.secrets : undefined;
  if (!secrets && !caps) {
    await store(deps.db, true);
    return { admitted: true };
  }
  return deps.db.transaction().execute(async (trx) => {
    const over = caps && (await lockAndCheckBusy(trx, conversation.tenant_id, conversation.user_id, caps));
    if (over && options.onCapacity === 'reject') return { admitted: false, refused: over };
    await store(trx, !over);
    if (secrets) await vaultRunSecrets({ db: trx, vault: deps.vault }, assistantMessageId, secrets, now);
    return { admitted: !over };
  });
}

/** A title from the first message: its first line, shortened. */
export function titleFrom(content: string): string {
  const firstLine = content.trim().split('\n')[0]?.trim() ?? '';
  return firstLine.length > TITLE_LENGTH ? `${firstLine.slice(0, TITLE_LENGTH - 1)}…` : firstLine;
}

export async function listMessages(deps: AppDeps, caller: Caller, conversationId: string, page: PageRequest) {
  await getConversationInScope(deps, caller, conversationId);
  return paginate(selectMessages(deps.db, conversationId), 'id', page);
}
