/**
 * A run parked on an approval: the agent called `request_approval`, so a pending Approval is raised
 * and announced on the stream, and the turn waits (its runner stays claimed) until the approval is
 * decided. Approved or denied, the stream says `resumed` and the agent gets the decision as the
 * tool's result; expired or deleted with its conversation, the run is aborted.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { placeholderFor } from '../../egress-proxy/placeholder.js';
import type { Vault } from '../core/crypto.js';
import { type Db, json } from '../core/db/database.js';
import type { IdGenerator } from '../core/ids.js';
import type { Metrics } from '../core/metrics.js';
import { ProblemError, problems } from '../core/problems.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { platformLine, type StreamLine } from '../runs/run-stream.js';
import type { ApprovalAnswer } from '../sandboxes/runner.js';
import type { GrowingMasker } from '../secrets/event-masking.js';
import { resolveRunSecrets } from '../secrets/secrets.service.js';
import type { ApprovalGate } from './approval-gate.js';
import { presentApproval } from './approvals.presenter.js';
import { type ApprovalRow, insertApproval } from './approvals.repository.js';
import { RequestApprovalInput } from './approvals.schemas.js';
import type { RunSecret } from '../../egress-proxy/secret-binding.js';

export interface ParkingDeps {
  db: Db;
  vault: Vault;
  /** The run's logger (it names the run and its request). */
  logger: Logger;
  now: () => Date;
  newId: IdGenerator;
  metrics: Metrics;
  approvals: ApprovalGate;
  /** Default and cap of an approval's life (ACIS_APPROVAL_TTL_SECONDS). */
  approvalTtlSeconds: number;
}

/** The run asking: what it is, and what of it the decision changes. */
export interface ParkedRun {
  conversation: ScopedConversationRow;
  messageId: string;
  /** Masks what the agent wrote before an approver sees it; learns secrets an approval supplies. */
  masker: GrowingMasker;
  /** The run's secrets (alias to value), grown by an approval that supplies some. */
  secrets: Map<string, RunSecret>;
  emit(line: StreamLine): void;
  /** Ends the run with a platform problem (expiry, the conversation gone). */
  abort(problem: ProblemError): void;
}

export async function parkOnApproval(deps: ParkingDeps, run: ParkedRun, input: unknown, turnOver: AbortSignal): Promise<ApprovalAnswer> {
  const parsed = RequestApprovalInput.safeParse(input);
  if (!parsed.success) return { isError: true, text: `Invalid request_approval input: ${z.prettifyError(parsed.error)}` };
  // What the agent wrote is masked like its events: a value it came by must not reach an approver.
  const asked = run.masker.maskValue(parsed.data);
  const now = deps.now();
  const lifeSeconds = Math.min(asked.expires_in_seconds ?? deps.approvalTtlSeconds, deps.approvalTtlSeconds);
  const raised = await insertApproval(deps.db, {
    id: deps.newId('approval'),
    tenant_id: run.conversation.tenant_id,
    conversation_id: run.conversation.id,
    message_id: run.messageId,
    status: 'pending',
    reason: asked.reason,
    requested_items: json(asked.requested_items),
    expires_at: new Date(now.getTime() + lifeSeconds * 1000),
    resolved_by: null,
    resolved_at: null,
    note: null,
    created_at: now,
    updated_at: now,
  });
  deps.metrics.approvalRequested();
  run.emit(platformLine('approval', { approval: presentApproval(raised) }));
  deps.logger.info({ approval_id: raised.id }, 'run parked on an approval');
  const outcome = await deps.approvals.wait(raised.id, turnOver);
  if (outcome.kind === 'ended') return { isError: true, text: 'The run ended before the approval was decided.' };
  if (outcome.kind === 'gone') {
    // Deleted with its conversation: the run ends as any run whose conversation went away.
    run.abort(problems.notFound('conversation'));
    return { isError: true, text: 'The conversation was deleted.' };
  }
  const decided = outcome.approval;
  if (decided.status === 'expired') {
    run.abort(
      new ProblemError('approval-expired', 409, { detail: `Approval ${raised.id} expired before anyone resolved it, so the run ended.` }),
    );
    return { isError: true, text: 'The approval expired.' };
  }
  if (decided.status === 'approved') {
    // Secrets given with the approval were vaulted at conversation scope: the run resolves them now.
    const fresh = await resolveRunSecrets(deps, { runId: run.messageId, conversation: run.conversation });
    for (const [alias, value] of fresh) run.secrets.set(alias, value);
    run.masker.add(fresh);
  }
  run.emit(platformLine('resumed', { approval: presentApproval(decided) }));
  deps.logger.info({ approval_id: raised.id, status: decided.status }, 'run resumed');
  return decisionAnswer(decided);
}

/** The tool result the agent sees for a decided approval. */
function decisionAnswer(approval: ApprovalRow): ApprovalAnswer {
  const note = approval.note ? ` Note from the approver: ${approval.note}` : '';
  if (approval.status !== 'approved') {
    return { isError: true, text: `Denied by ${approval.resolved_by}: do not perform the requested items.${note}` };
  }
  const aliases = approval.requested_items.flatMap((item) => (item.kind === 'secret' && item.alias ? [item.alias] : []));
  const secrets = aliases.length > 0 ? ` Requested secrets are usable as ${aliases.map(placeholderFor).join(', ')}.` : '';
  return { isError: false, text: `Approved by ${approval.resolved_by}.${secrets}${note}` };
}
