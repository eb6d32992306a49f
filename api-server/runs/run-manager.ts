import type { Logger } from 'pino';
import type { ApprovalGate } from '../approvals/approval-gate.js';
import { expireApprovalsOfMessage } from '../approvals/approvals.repository.js';
import { parkOnApproval } from '../approvals/run-parking.js';
import type { Vault } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import type { IdGenerator } from '../core/ids.js';
import { type Metrics, secondsSince } from '../core/metrics.js';
import { type ProblemError, problemBody, problems } from '../core/problems.js';
import { conversationRunMode, recordRunOnConversation } from '../conversations/conversations.repository.js';
import type { Lease, ReleaseOptions, SandboxProvider } from '../sandboxes/provider.js';
import type { ApprovalAnswer, TurnOutcome } from '../sandboxes/runner.js';
import { databaseSessionStore } from '../sandboxes/session-store.js';
import { presentMessage } from '../messages/messages.presenter.js';
import { storeRunOutcome } from '../messages/messages.repository.js';
import { GrowingMasker, maskedSessionStore } from '../secrets/event-masking.js';
import { deleteRunSecrets } from '../secrets/secrets.repository.js';
import { loadRunSkills } from '../skills/materialise.js';
import { type FillerOptions, streamFiller } from './filler.js';
import type { ReplyBuilder } from './reply.js';
import { internalProblem, turnTimeoutProblem, workspaceTooLargeProblem } from './run-problems.js';
import type { RunOutcome, RunRequest, TakenOverRun } from './run-request.js';
import { platformLine, RunStream, type StreamLine } from './run-stream.js';
import { orphanedRunProblem } from './nodes.js';
import { type ClaimDeps, claimProblem, claimRunner, sandboxFor, withSkills } from './runner-claim.js';
import { type FillerStream, TurnLines } from './turn-lines.js';
import type { RunSecret } from '../../egress-proxy/secret-binding.js';

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
  /** The longest a turn may take on its runner (ACIS_TURN_TIMEOUT_SECONDS). */
  turnTimeoutSeconds: number;
  metrics: Metrics;
}

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
      /** The request that started the run. */
      requestId: string;
      /** Alias to value; grows when an approval supplies secrets (the egress proxy reads this very map). */
      secrets: Map<string, RunSecret>;
      masker: GrowingMasker;
      abort?: ((problem: ProblemError) => void) | undefined;
    }
  >();
  private readonly running = new Set<Promise<unknown>>();
  /** Set once the node is shutting down: no new runs. */
  private closing = false;
  /** The problem runs still going at the shutdown deadline end with (see `endAll`). */
  private ending: ProblemError | undefined;
  /** Resolved (and replaced) whenever a run of this node ends: runs held for a busy-sandbox place count again. */
  private nextRunEnd = signalOnce();
  private readonly claimDeps: ClaimDeps;

  constructor(private readonly deps: RunManagerDeps) {
    this.claimDeps = { ...deps, runEnded: () => this.nextRunEnd.settled };
  }

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

  /** A run hosted here, for the egress proxy: its secrets (the same map for its whole life) and request id; none once it has ended. */
  liveRun(messageId: string): { secrets: ReadonlyMap<string, RunSecret>; requestId: string } | undefined {
    const run = this.live.get(messageId);
    return run && !run.stream.isEnded ? { secrets: run.secrets, requestId: run.requestId } : undefined;
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
    const log = this.logOf(request);
    log.info({ conversation_id: request.conversation.id, on_capacity: request.onCapacity }, 'run started');
    const stream = new RunStream(request.assistantMessageId, { ...this.deps, logger: log });
    for (const line of request.leadingLines) stream.append(line);
    return { stream, done: this.host(request, stream, log, (masker, startedMs) => this.execute(request, stream, masker, startedMs)) };
  }

  /**
   * Carries on a run whose node died, claimed for this node (`claimOrphanedRun`): its stream goes on
   * from the lines stored. A turn that had reached its runner goes on there, the runner taken over
   * where the dead node's record of it ends, and ends here as it would have there; when that runner
   * is gone (or cannot replay from there), the run ends failed with an error line. A turn that had not
   * reached its runner (no line of it stored) is started again, as its send would have started it.
   */
  takeOver(run: TakenOverRun): Promise<RunOutcome> {
    const log = this.logOf(run.request);
    log.info({ conversation_id: run.request.conversation.id, after: run.after }, 'run taken over');
    const stream = new RunStream(run.request.assistantMessageId, { ...this.deps, logger: log }, run.stored);
    return this.host(run.request, stream, log, (masker, startedMs) => {
      // Its stream had ended already (its outcome alone was not stored): the outcome is all that is left.
      if (stream.isEnded) return this.abort(run.request, stream, orphanedRunProblem());
      return run.after > 0 ? this.carryOn(run, stream, masker, startedMs) : this.execute(run.request, stream, masker, startedMs);
    });
  }

  /** Hosts a run on this node until it ends, however it ends; resolves with its outcome. */
  private host(
    request: RunRequest,
    stream: RunStream,
    log: Logger,
    execute: (masker: GrowingMasker, startedMs: number) => Promise<RunOutcome>,
  ): Promise<RunOutcome> {
    const startedMs = performance.now();
    const secrets = new Map(request.secrets);
    const masker = new GrowingMasker(secrets);
    this.live.set(request.assistantMessageId, { stream, requestId: request.requestId, secrets, masker });
    const done = execute(masker, startedMs)
      .catch(async (error: unknown) => {
        // Nothing awaits a streamed run, so a failure here must still end the stream rather than
        // escape as an unhandled rejection (e.g. the conversation was deleted mid-run).
        log.error({ err: error }, 'agent run failed unexpectedly');
        await deleteRunSecrets(this.deps.db, request.assistantMessageId).catch(() => undefined);
        const problem = internalProblem();
        stream.append(this.errorLine(request, problem));
        return { status: 'failed' as const, problem };
      })
      .then((outcome) => {
        const seconds = secondsSince(startedMs);
        this.deps.metrics.runEnded(outcome.status, outcome.problem?.kind, seconds);
        log.info({ status: outcome.status, problem: outcome.problem?.kind, duration_s: seconds }, 'run ended');
        return outcome;
      })
      .finally(async () => {
        await stream.flush();
        this.live.delete(request.assistantMessageId);
        const ended = this.nextRunEnd;
        this.nextRunEnd = signalOnce();
        ended.fire();
        // An approval the run was parked on when it ended otherwise can no longer be granted.
        await expireApprovalsOfMessage(this.deps.db, request.assistantMessageId, this.deps.now()).then(
          (expired) => {
            if (expired > 0) this.deps.metrics.approvalResolved('expired', expired);
          },
          (err: unknown) => log.warn({ err }, 'expiring the approvals of an ended run failed'),
        );
      });
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    return done;
  }

  /** The turn of a run taken over, on its runner taken over (see `takeOver`). */
  private async carryOn(run: TakenOverRun, stream: RunStream, masker: GrowingMasker, startedMs: number): Promise<RunOutcome> {
    const { request } = run;
    const resume = this.deps.provider.resumeRunner?.bind(this.deps.provider);
    let lease: Lease | undefined;
    if (resume) {
      lease = await resume(sandboxFor(request.conversation, request.assistantMessageId, request.requestId), run.after).catch(
        (error: unknown) => {
          this.logOf(request).warn({ err: error }, 'taking over the runner of an orphaned run failed');
          return undefined;
        },
      );
    }
    if (!lease) {
      const lines = new TurnLines(stream, masker, undefined);
      lines.continueFrom(run.stored);
      return this.abort(request, stream, orphanedRunProblem(), lines.reply);
    }
    this.logOf(request).info({ after: run.after }, 'took over the runner of an orphaned run');
    // The session runs with this run's skills (a held runner with another set was replaced before its turn):
    // said here so that the runner, held warm after the turn, can serve the next one.
    const skills = await loadRunSkills(this.deps, request.skillIds).catch(() => undefined);
    if (skills) lease.runner.offerSkills(skills.map((skill) => skill.name));
    return this.runTurn(request, stream, lease, Promise.resolve(), masker, startedMs, run.stored);
  }

  private async execute(request: RunRequest, stream: RunStream, masker: GrowingMasker, startedMs: number): Promise<RunOutcome> {
    if (request.refusal) return this.abort(request, stream, request.refusal);
    // Read while the runner gets ready; awaited (and a failure met) once there is one to give them to.
    const skills = loadRunSkills(this.deps, request.skillIds);
    skills.catch(() => undefined);
    let lease: Lease;
    try {
      lease = await claimRunner(this.claimDeps, request, stream);
    } catch (error) {
      const problem = claimProblem(error, request.onCapacity) ?? this.ending;
      if (!problem) this.logOf(request).error({ err: error }, 'acquiring a sandbox failed');
      return this.abort(request, stream, problem ?? internalProblem());
    }
    const { lease: ready, skillsDelivered } = await withSkills(this.claimDeps, request, lease, skills);
    return this.runTurn(request, stream, ready, skillsDelivered, masker, startedMs);
  }

  /** `continued`: the lines stored of a turn taken over, which goes on on `lease` (see `takeOver`). */
  private async runTurn(
    request: RunRequest,
    stream: RunStream,
    lease: Lease,
    skillsDelivered: Promise<void>,
    masker: GrowingMasker,
    startedMs: number,
    continued?: StreamLine[],
  ): Promise<RunOutcome> {
    let released: Promise<unknown> | undefined;
    // The runner keeps the turn's lines until they are stored here, then no longer needs to.
    stream.onSettled((origin) => lease.runner.settle(origin));
    try {
      // The turn's transcript store: it masks the run's secrets (also those an approval adds later).
      lease.runner.bindSessionStore(maskedSessionStore(databaseSessionStore(this.deps.db, request.conversation.id), masker));
      return await this.turnOn(
        request,
        stream,
        lease,
        skillsDelivered,
        masker,
        startedMs,
        (options) => (released = this.deps.provider.release(lease, options)),
        continued,
      );
    } finally {
      void stream.flush().then(() => lease.runner.settleAll());
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
    continued: StreamLine[] | undefined,
  ): Promise<RunOutcome> {
    const turnStartedMs = performance.now();
    const filler: FillerStream | undefined =
      request.filler && !continued ? (onLine) => streamFiller(this.deps.filler, request.content, onLine) : undefined;
    const lines = new TurnLines(stream, masker, filler, () => lease.runner.position || undefined);
    if (continued) lines.continueFrom(continued);
    const disarmAbort = this.armAbort(request.assistantMessageId, lease);
    const disarmBounds = this.armBounds(request.assistantMessageId, lease);
    const turned = await this.agentTurn(request, lease, lines, runStartedMs, continued !== undefined);
    disarmBounds();
    const aborted = disarmAbort();
    const outcome = await this.afterSkillsDelivered(request, turned, skillsDelivered);
    const turnSeconds = secondsSince(turnStartedMs);
    await lines.fillerDone;
    if (aborted) {
      this.logOf(request).warn({ problem: aborted.kind }, 'agent run aborted');
      this.deps.metrics.turnEnded('aborted', turnSeconds);
      await release({ broken: true });
      return this.abort(request, stream, aborted, lines.reply);
    }
    return this.endTurn(request, stream, lines, outcome, turnSeconds, release);
  }

  /**
   * Lets `abortRun` and `endAll` end this turn at once: the runner is killed (the turn resolves as
   * crashed) and recycled as broken by the caller. Returns the disarm, which says what the turn was
   * aborted with, if it was.
   */
  private armAbort(messageId: string, lease: Lease): () => ProblemError | undefined {
    let aborted: ProblemError | undefined;
    const live = this.live.get(messageId);
    if (live) {
      live.abort = (problem) => {
        if (aborted) return;
        aborted = problem;
        void lease.runner.kill();
      };
      if (this.ending) live.abort(this.ending);
    }
    return () => {
      if (live) live.abort = undefined;
      return aborted;
    };
  }

  /**
   * The turn's bounds, each ending it through `abortRun` with its own problem: the deadline
   * (ACIS_TURN_TIMEOUT_SECONDS), and what the provider itself watches (the local workspace size).
   */
  private armBounds(messageId: string, lease: Lease): () => void {
    const seconds = this.deps.turnTimeoutSeconds;
    const deadline = setTimeout(() => this.abortRun(messageId, turnTimeoutProblem(seconds)), seconds * 1000);
    const unwatch = lease.watchLimits?.((detail) => this.abortRun(messageId, workspaceTooLargeProblem(detail)));
    return () => {
      clearTimeout(deadline);
      unwatch?.();
    };
  }

  /**
   * The agent's turn on the runner (or, `continued`, the rest of a turn taken over); an approval it
   * asks for parks the run until it is resolved or the turn is over.
   */
  private async agentTurn(
    request: RunRequest,
    lease: Lease,
    lines: TurnLines,
    runStartedMs: number,
    continued: boolean,
  ): Promise<TurnOutcome> {
    let agentSpoke = continued;
    const turnOver = new AbortController();
    const turn = {
      runId: request.assistantMessageId,
      requestId: request.requestId,
      onApprovalRequest: (input: unknown) => this.parkRun(request, lines.emit, input, turnOver.signal),
    };
    const onEvent = (raw: StreamLine) => {
      if (!agentSpoke) {
        agentSpoke = true;
        this.deps.metrics.firstAgentLineAfter(secondsSince(runStartedMs));
      }
      lines.agentEvent(raw);
    };
    const turned = continued
      ? await lease.runner.continueTurn(turn, onEvent)
      : await lease.runner.runTurn(
          {
            ...turn,
            content: request.content,
            env: request.env,
            resume: lease.continuing ? undefined : (request.conversation.session_id ?? undefined),
          },
          onEvent,
        );
    turnOver.abort();
    return turned;
  }

  /** The agent asked for an approval: the run waits for its resolution (or its expiry, or the turn's end) and the agent gets the answer. */
  private parkRun(request: RunRequest, emit: (line: StreamLine) => void, input: unknown, turnOver: AbortSignal): Promise<ApprovalAnswer> {
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
    return parkOnApproval({ ...this.deps, logger: this.logOf(request) }, parked, input, turnOver);
  }

  /** A turn counts only if the skills it was sent behind arrived (the runner refuses it otherwise). */
  private async afterSkillsDelivered(request: RunRequest, turned: TurnOutcome, skillsDelivered: Promise<void>): Promise<TurnOutcome> {
    const undelivered = await skillsDelivered.then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    if (undelivered) this.logOf(request).error({ error: undelivered }, 'delivering the skills of a run failed');
    return undelivered && turned.kind !== 'crashed' ? { kind: 'crashed', error: `skills not delivered: ${undelivered}` } : turned;
  }

  /** The reply is stored while the runner's next state is worked out; message_end and the terminal line wait for both. */
  private async endTurn(
    request: RunRequest,
    stream: RunStream,
    lines: TurnLines,
    outcome: TurnOutcome,
    turnSeconds: number,
    release: (options: ReleaseOptions) => Promise<unknown>,
  ): Promise<RunOutcome> {
    const { terminal } = lines;
    const built = outcome.kind !== 'crashed' && terminal !== undefined ? lines.reply.build() : undefined;
    const storing = built
      ? this.finish(request.assistantMessageId, request.conversation.id, {
          status: built.agentFailed ? 'failed' : 'completed',
          content: built.content,
          parts: built.parts,
          usage: built.usage,
          sessionId: lines.sessionId,
        })
      : undefined;
    storing?.catch(() => undefined); // awaited below; this only keeps an early failure from counting as unhandled
    const released = release(await this.releaseOptions(request, outcome));
    this.deps.metrics.turnEnded(
      outcome.kind === 'crashed' ? 'crashed' : built?.agentFailed === false ? 'completed' : 'failed',
      turnSeconds,
    );
    if (!storing || !built || !terminal) {
      this.logOf(request).error({ error: outcome.kind === 'crashed' ? outcome.error : 'no result' }, 'agent run failed');
      await released;
      return this.abort(request, stream, this.ending ?? internalProblem(), lines.reply);
    }
    const stored = await storing;
    await released;
    if (!stored) return this.conversationGone(request, stream);
    // Both from the runner's `result` line: stored together, or neither is.
    stream.append(platformLine('message_end', { message: stored }), lines.terminalOrigin);
    stream.append(terminal, lines.terminalOrigin);
    return { status: built.agentFailed ? 'failed' : 'completed' };
  }

  /**
   * How the runner goes back: broken after a crash, discarded with its conversation, held while the
   * conversation is warm; left alone when the crash was the runner's link going to another node that
   * took the run over (this one was taken for dead).
   */
  private async releaseOptions(request: RunRequest, outcome: TurnOutcome): Promise<ReleaseOptions> {
    const conversationId = request.conversation.id;
    if (outcome.kind === 'crashed' && (await this.takenOver(request.assistantMessageId))) return { abandon: true };
    const mode = await conversationRunMode(this.deps.db, conversationId);
    return {
      broken: outcome.kind === 'crashed',
      discard: mode === undefined,
      ...(mode?.mode === 'warm' &&
        mode.idle_ttl_seconds !== null && {
          hold: { idleTtlSeconds: mode.idle_ttl_seconds, maxConcurrentWarm: mode.settings.max_concurrent_warm },
        }),
    };
  }

  /** Whether another node took the run over: its message names that node as its host now. */
  private async takenOver(messageId: string): Promise<boolean> {
    const row = await this.deps.db.selectFrom('messages').select('node_id').where('id', '=', messageId).executeTakeFirst();
    return row !== undefined && row.node_id !== this.deps.nodeId;
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

  /**
   * The run's logger: its lines carry the id of the request that started it (the caller's
   * `X-Request-Id` or ours) and its message id, long after that request has been answered.
   */
  private logOf(request: RunRequest): Logger {
    return this.deps.logger.child({ request_id: request.requestId, message_id: request.assistantMessageId });
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
      storeRunOutcome(this.deps.db, messageId, this.deps.nodeId, result, now),
      recordRunOnConversation(this.deps.db, conversationId, { at: now, sessionId: result.sessionId }),
    ]);
    if (!row) return undefined;
    return presentMessage(row);
  }
}

/** A promise to wait on and the one call that settles it. */
function signalOnce(): { settled: Promise<void>; fire: () => void } {
  let fire: () => void = () => undefined;
  const settled = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { settled, fire };
}
