import type { Logger } from 'pino';
import { type Db, json } from '../core/db/database.js';
import type { TenantSettings } from '../core/db/schema.js';
import type { IdGenerator } from '../core/ids.js';
import { ProblemError, problemBody, problems } from '../core/problems.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import { CapacityExhausted, type Lease, type LocalSandboxProvider, type ReleaseOptions } from '../sandboxes/local-provider.js';
import { databaseSessionStore } from '../sandboxes/session-store.js';
import { presentMessage } from '../messages/messages.presenter.js';
import { createMasker, EventMasker, maskedSessionStore, type SecretMasker } from '../secrets/masking.js';
import { deleteRunSecrets } from '../secrets/secrets.repository.js';
import { type FillerOptions, streamFiller } from './filler.js';
import { ReplyBuilder } from './reply.js';
import { RunStream, type StreamLine } from './run-stream.js';

export interface RunManagerDeps {
  db: Db;
  logger: Logger;
  now: () => Date;
  newId: IdGenerator;
  provider: LocalSandboxProvider;
  nodeId: string;
  maxHoldSeconds: number;
  filler: FillerOptions;
}

export interface RunRequest {
  conversation: ScopedConversationRow;
  assistantMessageId: string;
  content: string;
  /** The message's `env`, shown to the agent with the turn. */
  env?: Record<string, string> | undefined;
  onCapacity: 'reject' | 'hold';
  /** Already acquired (on_capacity=reject acquires before anything is persisted). */
  lease?: Lease;
  /** Lines that open the stream (the `conversation` line of create and upsert). */
  leadingLines: StreamLine[];
  /** Whether the filler cascade enables a quick acknowledgement ahead of the agent. */
  filler: boolean;
  /** `{base_url}` for problem types in `error` lines, and the request that started the run. */
  baseUrl: string;
  requestId: string;
  /** The run's resolved secrets (alias to value): masked out of everything the run emits or stores. */
  secrets: ReadonlyMap<string, string>;
  /** A platform refusal found before anything ran (missing-secret): the run ends with it at once. */
  refusal?: ProblemError | undefined;
}

export type RunOutcome = { status: 'completed' | 'failed'; problem?: ProblemError };

export function platformLine(type: string, fields: Record<string, unknown> = {}): StreamLine {
  return { object: 'platform.event', type, ...fields };
}

/**
 * Runs agent turns for messages on this node. A run outlives the request that started it: the
 * stream is only a view, so a client that disconnects truncates its view while the run goes on and
 * the reply still lands in history.
 */
export class RunManager {
  private readonly live = new Map<
    string,
    { stream: RunStream; secrets: ReadonlyMap<string, string>; abort?: ((problem: ProblemError) => void) | undefined }
  >();
  private readonly running = new Set<Promise<unknown>>();

  constructor(private readonly deps: RunManagerDeps) {}

  liveStream(messageId: string): RunStream | undefined {
    return this.live.get(messageId)?.stream;
  }

  /** The secrets of a run hosted here (the same map for its whole life, none once it has ended), for the egress proxy. */
  runSecrets(messageId: string): ReadonlyMap<string, string> | undefined {
    const run = this.live.get(messageId);
    return run && !run.stream.isEnded ? run.secrets : undefined;
  }

  /**
   * Aborts a run in progress on this node with a platform problem (the egress proxy met a placeholder
   * the run cannot resolve): its runner is killed and recycled as broken, the message fails and the
   * stream ends with message_end and an `error` line. False when no turn of that run is running here.
   */
  abortRun(messageId: string, problem: ProblemError): boolean {
    const abort = this.live.get(messageId)?.abort;
    abort?.(problem);
    return abort !== undefined;
  }

  /** Waits for every run of this node to finish (shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }

  /** Starts the run; returns its stream at once and the outcome when it ends. */
  start(request: RunRequest): { stream: RunStream; done: Promise<RunOutcome> } {
    const stream = new RunStream(request.assistantMessageId, this.deps.db, this.deps.logger, this.deps.now);
    this.live.set(request.assistantMessageId, { stream, secrets: request.secrets });
    for (const line of request.leadingLines) stream.append(line);
    const done = this.execute(request, stream, createMasker(request.secrets))
      .catch(async (error: unknown) => {
        // Nothing awaits a streamed run, so a failure here must still end the stream rather than
        // escape as an unhandled rejection (e.g. the conversation was deleted mid-run).
        this.deps.logger.error({ err: error, message_id: request.assistantMessageId }, 'agent run failed unexpectedly');
        await deleteRunSecrets(this.deps.db, request.assistantMessageId).catch(() => undefined);
        const problem = internalProblem();
        stream.append(this.errorLine(request, problem));
        return { status: 'failed' as const, problem };
      })
      .finally(async () => {
        await stream.flush();
        this.live.delete(request.assistantMessageId);
      });
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    return { stream, done };
  }

  private async execute(request: RunRequest, stream: RunStream, masker: SecretMasker): Promise<RunOutcome> {
    const { conversation } = request;
    if (request.refusal) return this.abort(request, stream, request.refusal);
    let lease = request.lease;
    try {
      if (!lease) {
        lease = await this.deps.provider.acquire(
          {
            agentType: conversation.agent_type,
            conversationId: conversation.id,
            tenantId: conversation.tenant_id,
            store: maskedSessionStore(databaseSessionStore(this.deps.db, conversation.id), masker),
          },
          {
            wait: request.onCapacity === 'hold',
            signal: AbortSignal.timeout(this.deps.maxHoldSeconds * 1000),
            onQueued: (position, retryHint) =>
              stream.append(platformLine('queued', { position, retry_hint_seconds: retryHint })),
          },
        );
      }
    } catch (error) {
      const problem =
        error instanceof CapacityExhausted
          ? new ProblemError('capacity-exhausted', 429, {
              detail: 'No sandbox became available within the maximum hold time.',
              headers: { 'Retry-After': String(error.retryAfterSeconds) },
            })
          : internalProblem();
      if (!(error instanceof CapacityExhausted)) this.deps.logger.error({ err: error }, 'acquiring a sandbox failed');
      return this.abort(request, stream, problem);
    }
    return this.runTurn(request, stream, lease, masker);
  }

  private async runTurn(request: RunRequest, stream: RunStream, lease: Lease, masker: SecretMasker): Promise<RunOutcome> {
    let released: Promise<unknown> | undefined;
    try {
      return await this.turnOn(request, stream, lease, masker, (options) => (released = this.deps.provider.release(lease, options)));
    } finally {
      // Whatever failed on the way, the runner must not stay busy (its capacity would leak); its
      // state is unknown then, so it is not held either.
      await (released ?? this.deps.provider.release(lease, { broken: true }));
    }
  }

  /** One turn on a claimed runner; `release` hands the runner back once the turn's outcome is known. */
  private async turnOn(
    request: RunRequest,
    stream: RunStream,
    lease: Lease,
    masker: SecretMasker,
    release: (options: ReleaseOptions) => Promise<unknown>,
  ): Promise<RunOutcome> {
    const { conversation } = request;
    const reply = new ReplyBuilder();
    let terminal: StreamLine | undefined;
    let sessionId: string | undefined;
    // While the filler streams, the agent's lines wait, so its acknowledgement comes first.
    const held: StreamLine[] | undefined = request.filler ? [] : undefined;
    let pending = held;
    const fillerMasker = new EventMasker(masker);
    const fillerDone = request.filler
      ? streamFiller(this.deps.filler, request.content, (line) => fillerMasker.push(line).forEach((l) => stream.append(l))).then(
          (text) => {
            fillerMasker.flush().forEach((l) => stream.append(l));
            reply.addLeadingText(masker.maskText(text));
            pending = undefined;
            for (const line of held ?? []) stream.append(line);
          },
        )
      : Promise.resolve();
    // Every agent event is masked before anything else sees it: the stream, the stored reply, the result.
    const agentMasker = new EventMasker(masker);
    let aborted: ProblemError | undefined;
    const live = this.live.get(request.assistantMessageId);
    if (live) {
      live.abort = (problem) => {
        if (aborted) return;
        aborted = problem;
        // Ends the turn at once (it resolves as crashed); the runner is recycled as broken below.
        void lease.runner.kill();
      };
    }
    const outcome = await lease.runner.runTurn(
      {
        content: request.content,
        env: request.env,
        resume: lease.continuing ? undefined : (conversation.session_id ?? undefined),
        runId: request.assistantMessageId,
      },
      (raw) => {
        for (const event of agentMasker.push(raw)) {
          if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') {
            sessionId = event.session_id;
          }
          reply.add(event);
          // The agent's `result` is the terminal line: it is held back until the reply is stored and
          // `message_end` has gone out.
          if (event.type === 'result') terminal = event;
          else if (pending) pending.push(event);
          else stream.append(event);
        }
      },
    );
    if (live) live.abort = undefined;
    await fillerDone;
    if (aborted) {
      this.deps.logger.warn({ message_id: request.assistantMessageId, problem: aborted.kind }, 'agent run aborted');
      await release({ broken: true });
      return this.abort(request, stream, aborted, reply);
    }
    const mode = await this.currentMode(conversation.id);
    const released = release({
      broken: outcome.kind === 'crashed',
      discard: mode === undefined,
      ...(mode?.mode === 'warm' &&
        mode.idle_ttl_seconds !== null && {
          hold: { idleTtlSeconds: mode.idle_ttl_seconds, maxConcurrentWarm: mode.settings.max_concurrent_warm },
        }),
    });
    if (outcome.kind === 'crashed' || !terminal) {
      this.deps.logger.error({ message_id: request.assistantMessageId, error: outcome.kind === 'crashed' ? outcome.error : 'no result' }, 'agent run failed');
      await released;
      return this.abort(request, stream, internalProblem(), reply);
    }
    const built = reply.build();
    const status = built.agentFailed ? 'failed' : 'completed';
    const stored = await this.finish(request.assistantMessageId, conversation.id, {
      status,
      content: built.content,
      parts: built.parts,
      usage: built.usage,
      sessionId,
    });
    await released;
    if (!stored) return this.conversationGone(request, stream);
    stream.append(platformLine('message_end', { message: stored }));
    stream.append(terminal);
    return { status };
  }

  /** A platform abort: the message fails and the stream ends with an `error` line carrying the problem. */
  private async abort(request: RunRequest, stream: RunStream, problem: ProblemError, reply?: ReplyBuilder): Promise<RunOutcome> {
    const built = reply?.build();
    const stored = await this.finish(request.assistantMessageId, request.conversation.id, {
      status: 'failed',
      content: built?.content ?? '',
      parts: built?.parts ?? [],
      usage: built?.usage ?? null,
    });
    if (!stored) return this.conversationGone(request, stream);
    stream.append(platformLine('message_end', { message: stored }));
    stream.append(this.errorLine(request, problem));
    return { status: 'failed', problem };
  }

  /** The conversation (and with it this message) was deleted while the run went on: there is nothing to end with but the problem. */
  private conversationGone(request: RunRequest, stream: RunStream): RunOutcome {
    const problem = problems.notFound('conversation');
    stream.append(this.errorLine(request, problem));
    return { status: 'failed', problem };
  }

  private errorLine(request: RunRequest, problem: ProblemError): StreamLine {
    return platformLine('error', {
      problem: problemBody(problem, {
        baseUrl: request.baseUrl,
        instance: `/conversations/${request.conversation.id}/messages/${request.assistantMessageId}`,
        requestId: request.requestId,
      }),
    });
  }

  /** Stores the run's outcome; the run's own secrets go first, so once a client sees the end they are gone. */
  private async finish(
    messageId: string,
    conversationId: string,
    result: { status: 'completed' | 'failed'; content: string; parts: unknown[]; usage: unknown; sessionId?: string | undefined },
  ) {
    await deleteRunSecrets(this.deps.db, messageId);
    const now = this.deps.now();
    const row = await this.deps.db
      .updateTable('messages')
      .set({
        status: result.status,
        content: result.content,
        parts: json(result.parts),
        usage: result.usage ? json(result.usage) : null,
        node_id: null,
        updated_at: now,
      })
      .where('id', '=', messageId)
      .returningAll()
      .executeTakeFirst();
    if (!row) return undefined;
    await this.deps.db
      .updateTable('conversations')
      .set({ last_message_at: now, updated_at: now, ...(result.sessionId && { session_id: result.sessionId }) })
      .where('id', '=', conversationId)
      .execute();
    return presentMessage(row);
  }

  private currentMode(conversationId: string): Promise<{ mode: 'pooled' | 'warm'; idle_ttl_seconds: number | null; settings: TenantSettings } | undefined> {
    return this.deps.db
      .selectFrom('conversations')
      .innerJoin('tenants', 'tenants.id', 'conversations.tenant_id')
      .select(['conversations.mode', 'conversations.idle_ttl_seconds', 'tenants.settings'])
      .where('conversations.id', '=', conversationId)
      .executeTakeFirst();
  }
}

function internalProblem(): ProblemError {
  return new ProblemError('internal-error', 500, { detail: 'The agent run failed on the platform side.' });
}
