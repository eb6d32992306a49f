import type { Logger } from 'pino';
import type { ApprovalGate } from '../approvals/approval-gate.js';
import { expireApprovalsOfMessage } from '../approvals/approvals.repository.js';
import { parkOnApproval } from '../approvals/run-parking.js';
import type { Vault } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import type { IdGenerator } from '../core/ids.js';
import { type Metrics, secondsSince } from '../core/metrics.js';
import { ProblemError, problemBody, problems } from '../core/problems.js';
import { conversationRunMode, recordRunOnConversation, type ScopedConversationRow } from '../conversations/conversations.repository.js';
import {
  type AcquireRequest,
  CapacityExhausted,
  type Lease,
  type ReleaseOptions,
  type SandboxProvider,
  SandboxUnavailable,
} from '../sandboxes/provider.js';
import type { TurnOutcome } from '../sandboxes/runner.js';
import { databaseSessionStore } from '../sandboxes/session-store.js';
import { presentMessage } from '../messages/messages.presenter.js';
import { storeRunOutcome } from '../messages/messages.repository.js';
import { EventMasker, GrowingMasker, maskedSessionStore } from '../secrets/event-masking.js';
import { deleteRunSecrets } from '../secrets/secrets.repository.js';
import { loadRunSkills, type RunSkill } from '../skills/materialise.js';
import { type FillerOptions, streamFiller } from './filler.js';
import { ReplyBuilder } from './reply.js';
import { platformLine, RunStream, type StreamLine } from './run-stream.js';

export interface RunManagerDeps {
  db: Db;
  logger: Logger;
  now: () => Date;
  newId: IdGenerator;
  provider: SandboxProvider;
  nodeId: string;
  maxHoldSeconds: number;
  filler: FillerOptions;
  vault: Vault;
  approvals: ApprovalGate;
  /** Default and cap of an approval's life (ACIS_APPROVAL_TTL_SECONDS). */
  approvalTtlSeconds: number;
  metrics: Metrics;
}

export interface RunRequest {
  conversation: ScopedConversationRow;
  assistantMessageId: string;
  content: string;
  /** The message's `env`, shown to the agent with the turn. */
  env?: Record<string, string> | undefined;
  onCapacity: 'reject' | 'hold';
  /** Already admitted, the runner still getting ready (on_capacity=reject is admitted before anything is persisted). */
  lease?: Promise<Lease> | undefined;
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
  /** The run's effective skills (snapshot, narrowed by the conversation's selection and the message's skill_ids). */
  skillIds: string[];
}

export type RunOutcome = { status: 'completed' | 'failed'; problem?: ProblemError };

/**
 * Runs agent turns for messages on this node. A run outlives the request that started it: the
 * stream is only a view, so a client that disconnects truncates its view while the run goes on and
 * the reply still lands in history.
 */
export class RunManager {
  private readonly live = new Map<
    string,
    {
      stream: RunStream;
      /** Alias to value; grows when an approval supplies secrets (the egress proxy reads this very map). */
      secrets: Map<string, string>;
      masker: GrowingMasker;
      abort?: ((problem: ProblemError) => void) | undefined;
    }
  >();
  private readonly running = new Set<Promise<unknown>>();
  /** Set once the node is shutting down: no new runs. */
  private closing = false;
  /** The problem runs still going at the shutdown deadline end with (see `endAll`). */
  private ending: ProblemError | undefined;

  constructor(private readonly deps: RunManagerDeps) {}

  /** False once the node is shutting down: new messages are refused (`shutting-down`). */
  get accepting(): boolean {
    return !this.closing;
  }

  /** Takes no new runs from now on; the runs in progress go on (see `drain`, `endAll`). */
  close(): void {
    this.closing = true;
  }

  /**
   * Ends every run still in progress with `problem` (the shutdown deadline passed): each turn's runner
   * is killed, its message stored `failed` and its stream ended with an `error` line, which stays
   * stored for a re-attach. A run that has not reached its turn yet ends the same way when it does.
   */
  endAll(problem: ProblemError): void {
    this.ending = problem;
    for (const run of this.live.values()) run.abort?.(problem);
  }

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

  /** Waits for every run of this node to finish (shutdown); true when they did within `timeoutMs`. */
  async drain(timeoutMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    const all = Promise.allSettled([...this.running]).then(() => true);
    if (!Number.isFinite(timeoutMs)) return all;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const drained = await Promise.race([all, late]);
    clearTimeout(timer);
    return drained;
  }

  /** Starts the run; returns its stream at once and the outcome when it ends. */
  start(request: RunRequest): { stream: RunStream; done: Promise<RunOutcome> } {
    const startedMs = performance.now();
    const stream = new RunStream(request.assistantMessageId, this.deps.db, this.deps.logger, this.deps.now);
    const secrets = new Map(request.secrets);
    const masker = new GrowingMasker(secrets);
    this.live.set(request.assistantMessageId, { stream, secrets, masker });
    for (const line of request.leadingLines) stream.append(line);
    const done = this.execute(request, stream, masker, startedMs)
      .catch(async (error: unknown) => {
        // Nothing awaits a streamed run, so a failure here must still end the stream rather than
        // escape as an unhandled rejection (e.g. the conversation was deleted mid-run).
        this.deps.logger.error({ err: error, message_id: request.assistantMessageId }, 'agent run failed unexpectedly');
        await deleteRunSecrets(this.deps.db, request.assistantMessageId).catch(() => undefined);
        const problem = internalProblem();
        stream.append(this.errorLine(request, problem));
        return { status: 'failed' as const, problem };
      })
      .then((outcome) => {
        this.deps.metrics.runEnded(outcome.status, outcome.problem?.kind, secondsSince(startedMs));
        return outcome;
      })
      .finally(async () => {
        await stream.flush();
        this.live.delete(request.assistantMessageId);
        // An approval the run was parked on when it ended otherwise can no longer be granted.
        await expireApprovalsOfMessage(this.deps.db, request.assistantMessageId, this.deps.now()).then(
          (expired) => {
            if (expired > 0) this.deps.metrics.approvalResolved('expired', expired);
          },
          (err: unknown) => this.deps.logger.warn({ err, message_id: request.assistantMessageId }, 'expiring the approvals of an ended run failed'),
        );
      });
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    return { stream, done };
  }

  private async execute(request: RunRequest, stream: RunStream, masker: GrowingMasker, startedMs: number): Promise<RunOutcome> {
    const { conversation } = request;
    if (request.refusal) return this.abort(request, stream, request.refusal);
    // Read while the runner gets ready; awaited (and a failure met) once there is one to give them to.
    const skills = loadRunSkills(this.deps, request.skillIds);
    skills.catch(() => undefined);
    let lease: Lease;
    let queuedMs: number | undefined;
    try {
      if (request.lease) lease = await request.lease;
      else {
        lease = await this.deps.provider.acquire(sandboxFor(conversation, request.assistantMessageId), {
          wait: request.onCapacity === 'hold',
          signal: AbortSignal.timeout(this.deps.maxHoldSeconds * 1000),
          onQueued: (position, retryHint) => {
            queuedMs ??= performance.now();
            stream.append(platformLine('queued', { position, retry_hint_seconds: retryHint }));
          },
        });
        if (queuedMs !== undefined) this.deps.metrics.holdEnded('served', secondsSince(queuedMs));
      }
    } catch (error) {
      if (error instanceof CapacityExhausted) {
        this.deps.metrics.capacityRejected(request.onCapacity);
        if (queuedMs !== undefined) this.deps.metrics.holdEnded('timed-out', secondsSince(queuedMs));
      }
      const problem =
        error instanceof CapacityExhausted
          ? new ProblemError('capacity-exhausted', 429, {
              detail:
                request.onCapacity === 'hold'
                  ? 'No sandbox became available within the maximum hold time.'
                  : 'No sandbox is available; retry later or send with on_capacity=hold.',
              headers: { 'Retry-After': String(error.retryAfterSeconds) },
            })
          : error instanceof SandboxUnavailable
            ? sandboxUnavailableProblem(error.reason)
            : (this.ending ?? internalProblem());
      if (!(error instanceof CapacityExhausted || error instanceof SandboxUnavailable || this.ending)) {
        this.deps.logger.error({ err: error }, 'acquiring a sandbox failed');
      }
      return this.abort(request, stream, problem);
    }
    const { lease: ready, skillsDelivered } = await this.withSkills(request, lease, skills);
    return this.runTurn(request, stream, ready, skillsDelivered, masker, startedMs);
  }

  /**
   * Sends the run's skills to the runner (it writes them into its workspace) and has it offer exactly
   * those. A live session keeps offering the set it started with, so a held runner whose set differs
   * is recycled and a fresh one resumes the transcript with this run's set. The turn goes out right
   * behind the skills, unanswered (the runner starts a turn only once the workspace changes sent
   * before it are done, and never after one failed): `skillsDelivered` settles with their answer.
   */
  private async withSkills(request: RunRequest, lease: Lease, loaded: Promise<RunSkill[]>): Promise<{ lease: Lease; skillsDelivered: Promise<void> }> {
    let current = lease;
    try {
      const skills = await loaded;
      const names = skills.map((skill) => skill.name);
      const offered = current.runner.sessionSkills;
      if (current.continuing && (offered?.length !== names.length || offered.some((name, i) => name !== names[i]))) {
        await this.deps.provider.release(current, { broken: true });
        current = await this.deps.provider.acquire(sandboxFor(request.conversation, request.assistantMessageId), {
          wait: true,
          signal: AbortSignal.timeout(this.deps.maxHoldSeconds * 1000),
        });
      }
      const skillsDelivered = current.runner.deliverSkills(skills);
      // Awaited after the turn; this only keeps a failure before then from counting as unhandled.
      skillsDelivered.catch(() => undefined);
      current.runner.offerSkills(names);
      return { lease: current, skillsDelivered };
    } catch (error) {
      await this.deps.provider.release(current, { broken: true });
      throw error;
    }
  }

  private async runTurn(
    request: RunRequest,
    stream: RunStream,
    lease: Lease,
    skillsDelivered: Promise<void>,
    masker: GrowingMasker,
    startedMs: number,
  ): Promise<RunOutcome> {
    let released: Promise<unknown> | undefined;
    try {
      // The turn's transcript store: it masks the run's secrets (also those an approval adds later).
      lease.runner.bindSessionStore(maskedSessionStore(databaseSessionStore(this.deps.db, request.conversation.id), masker));
      return await this.turnOn(request, stream, lease, skillsDelivered, masker, startedMs, (options) => (released = this.deps.provider.release(lease, options)));
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
    skillsDelivered: Promise<void>,
    masker: GrowingMasker,
    runStartedMs: number,
    release: (options: ReleaseOptions) => Promise<unknown>,
  ): Promise<RunOutcome> {
    const { conversation } = request;
    const turnStartedMs = performance.now();
    let agentSpoke = false;
    const reply = new ReplyBuilder();
    let terminal: StreamLine | undefined;
    let sessionId: string | undefined;
    // While the filler streams, the turn's lines (the agent's and the platform's) wait, so its
    // acknowledgement comes first.
    const held: StreamLine[] | undefined = request.filler ? [] : undefined;
    let pending = held;
    const emit = (line: StreamLine) => (pending ? pending.push(line) : stream.append(line));
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
      if (this.ending) live.abort(this.ending);
    }
    // Ends any approval wait of this turn once the turn is over, however it ended.
    const turnOver = new AbortController();
    const turned = await lease.runner.runTurn(
      {
        content: request.content,
        env: request.env,
        resume: lease.continuing ? undefined : (conversation.session_id ?? undefined),
        runId: request.assistantMessageId,
        onApprovalRequest: (input) => {
          const run = this.live.get(request.assistantMessageId);
          if (!run) return Promise.resolve({ isError: true, text: 'The run is not active.' });
          const parked = {
            conversation: request.conversation,
            messageId: request.assistantMessageId,
            masker: run.masker,
            secrets: run.secrets,
            emit,
            abort: (problem: ProblemError) => this.abortRun(request.assistantMessageId, problem),
          };
          return parkOnApproval(this.deps, parked, input, turnOver.signal);
        },
      },
      (raw) => {
        if (!agentSpoke) {
          agentSpoke = true;
          this.deps.metrics.firstAgentLineAfter(secondsSince(runStartedMs));
        }
        for (const event of agentMasker.push(raw)) {
          if (event.type === 'system' && event.subtype === 'init' && typeof event.session_id === 'string') {
            sessionId = event.session_id;
          }
          reply.add(event);
          // The agent's `result` is the terminal line: it is held back until the reply is stored and
          // `message_end` has gone out.
          if (event.type === 'result') terminal = event;
          else emit(event);
        }
      },
    );
    turnOver.abort();
    if (live) live.abort = undefined;
    // A turn counts only if the skills it was sent behind arrived (the runner refuses it otherwise).
    const undelivered = await skillsDelivered.then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    if (undelivered) this.deps.logger.error({ message_id: request.assistantMessageId, error: undelivered }, 'delivering the skills of a run failed');
    const outcome: TurnOutcome = undelivered && turned.kind !== 'crashed' ? { kind: 'crashed', error: `skills not delivered: ${undelivered}` } : turned;
    const turnSeconds = secondsSince(turnStartedMs);
    await fillerDone;
    if (aborted) {
      this.deps.logger.warn({ message_id: request.assistantMessageId, problem: aborted.kind }, 'agent run aborted');
      this.deps.metrics.turnEnded('aborted', turnSeconds);
      await release({ broken: true });
      return this.abort(request, stream, aborted, reply);
    }
    const succeeded = outcome.kind !== 'crashed' && terminal !== undefined;
    const built = succeeded ? reply.build() : undefined;
    // The reply is stored while the runner's next state is worked out: the terminal line waits for both.
    const storing = built
      ? this.finish(request.assistantMessageId, conversation.id, {
          status: built.agentFailed ? 'failed' : 'completed',
          content: built.content,
          parts: built.parts,
          usage: built.usage,
          sessionId,
        })
      : undefined;
    storing?.catch(() => undefined); // awaited below; this only keeps an early failure from counting as unhandled
    const mode = await conversationRunMode(this.deps.db, conversation.id);
    const released = release({
      broken: outcome.kind === 'crashed',
      discard: mode === undefined,
      ...(mode?.mode === 'warm' &&
        mode.idle_ttl_seconds !== null && {
          hold: { idleTtlSeconds: mode.idle_ttl_seconds, maxConcurrentWarm: mode.settings.max_concurrent_warm },
        }),
    });
    this.deps.metrics.turnEnded(outcome.kind === 'crashed' ? 'crashed' : built?.agentFailed === false ? 'completed' : 'failed', turnSeconds);
    if (!storing || !built || !terminal) {
      this.deps.logger.error({ message_id: request.assistantMessageId, error: outcome.kind === 'crashed' ? outcome.error : 'no result' }, 'agent run failed');
      await released;
      return this.abort(request, stream, this.ending ?? internalProblem(), reply);
    }
    const status = built.agentFailed ? 'failed' : 'completed';
    const stored = await storing;
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

  /** Stores the run's outcome and deletes the run's own secrets: once a client sees the end they are gone. */
  private async finish(
    messageId: string,
    conversationId: string,
    result: { status: 'completed' | 'failed'; content: string; parts: unknown[]; usage: unknown; sessionId?: string | undefined },
  ) {
    const now = this.deps.now();
    // Independent statements, run side by side; all are done before anyone is told the run ended.
    const [, row] = await Promise.all([
      deleteRunSecrets(this.deps.db, messageId),
      storeRunOutcome(this.deps.db, messageId, result, now),
      recordRunOnConversation(this.deps.db, conversationId, { at: now, sessionId: result.sessionId }),
    ]);
    if (!row) return undefined;
    return presentMessage(row);
  }
}

/** What the sandbox provider needs of a conversation to place its run. */
export function sandboxFor(conversation: ScopedConversationRow, runId: string): AcquireRequest {
  return { agentType: conversation.agent_type, conversationId: conversation.id, tenantId: conversation.tenant_id, runId };
}

/** This node cannot start runners; `reason` says what is missing and how to install it. */
export function sandboxUnavailableProblem(reason: string): ProblemError {
  return new ProblemError('sandbox-unavailable', 503, { detail: reason });
}

/** The node is shutting down and takes no new messages; another node (or this one once restarted) will. */
export function shuttingDownProblem(): ProblemError {
  return new ProblemError('shutting-down', 503, {
    detail: 'This server is shutting down and takes no new messages; send it again (another node, or this one once restarted, serves it).',
    headers: { 'Retry-After': '1' },
  });
}

function internalProblem(): ProblemError {
  return new ProblemError('internal-error', 500, { detail: 'The agent run failed on the platform side.' });
}
