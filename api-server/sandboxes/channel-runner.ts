import type { Logger } from 'pino';
import { breachedBound, type Channel, type SettlingChannel } from '../../runner/channel.js';
import { isRunnerLine, type RunnerLine, type ServerCommand } from '../../runner/protocol.js';
import { type RunSkill, wireSkills } from '../skills/materialise.js';
import {
  type AgentEvent,
  DEFAULT_RUNNER_BOUNDS,
  DEFAULT_WORKSPACE_MAX_BYTES,
  type Runner,
  type RunnerBounds,
  type TurnOutcome,
  type TurnRequest,
  type WorkspaceExportOptions,
} from './runner.js';
import type { ConversationSessionStore } from './session-store.js';

/** A workspace archive crosses the channel in pieces of this many bytes (before base64). */
const ARCHIVE_PIECE_BYTES = 1024 * 1024;
/** The runtime awaits its transcript and approval calls one by one: a runner with this many open is flooding. */
const MAX_CALLS_IN_FLIGHT = 64;

interface PendingOp {
  resolve: (pieces: Buffer[]) => void;
  reject: (error: Error) => void;
  pieces: Buffer[];
  bytes: number;
  maxBytes: number;
}

/**
 * One runner as the API server sees it, over whatever channel reaches it: send a turn, receive the
 * agent's events until its `result`, answer the runner's session-store and approval calls, hand it
 * skills and workspace archives. It knows no process or socket: whoever hosts the runner says when it
 * has ended (`end`) and how to stop it. A runner serves one conversation; it is bound to one at claim
 * and never reused for another.
 */
export class ChannelRunner implements Runner {
  private onEvent: ((event: AgentEvent) => void) | undefined;
  private onTurnEnd: ((outcome: TurnOutcome) => void) | undefined;
  private onApprovalRequest: TurnRequest['onApprovalRequest'];
  private readonly settling: SettlingChannel | undefined;
  private readonly bounds: RunnerBounds;
  private store: ConversationSessionStore | undefined;
  private ended = false;
  private endReason = '';
  private turnRunId: string | undefined;
  private turnRequestId: string | undefined;
  /** The skills the next turn offers (see offerSkills), and those its session was started with. */
  private offered: string[] | undefined;
  private started: string[] | undefined;
  private readonly ops = new Map<number, PendingOp>();
  /** Approval calls already raised (a runner taken over asks again what may not have been answered). */
  private readonly approvalsAsked = new Set<number>();
  /** Lines of a turn taken over, received before `continueTurn` said where they go. */
  private backlog: string[] | undefined;
  private nextOpId = 1;
  /** Bytes of the current turn's lines (its run holds them until it ends), and of the runner's calls not answered yet. */
  private turnBytes = 0;
  private callBytes = 0;
  private callsInFlight = 0;
  private markReady: () => void = () => {};
  private failReadyWith: (error: Error) => void = () => {};
  private markExited: () => void = () => {};
  private markSpoke: () => void = () => {};
  /** Settles once the runner said it is up (or failed, if it ended first). */
  readonly ready: Promise<void>;
  /** Settles at the first agent event the runner sends, or once it has ended. */
  readonly spoke: Promise<void>;
  /** Settles once the runner has ended, however. */
  readonly exit: Promise<void>;

  constructor(
    readonly id: string,
    private readonly channel: Channel,
    protected readonly logger: Logger,
    /** Stops the runner for good (kill the process, close the link); `end` follows. */
    private readonly stopRunner: () => void,
    link: {
      /** The channel numbers its lines and keeps them until settled (see `settle`). */
      settling?: SettlingChannel | undefined;
      /** The channel was taken over mid-turn: its lines wait for `continueTurn`. */
      resuming?: boolean | undefined;
      /** What the runner can make this side hold before it is dropped. */
      bounds?: RunnerBounds | undefined;
    } = {},
  ) {
    this.settling = link.settling;
    this.bounds = link.bounds ?? DEFAULT_RUNNER_BOUNDS;
    if (link.resuming) this.backlog = [];
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReadyWith = reject;
    });
    this.ready.catch(() => undefined);
    this.exit = new Promise<void>((resolve) => (this.markExited = resolve));
    this.spoke = new Promise<void>((resolve) => (this.markSpoke = resolve));
    channel.onLine((text) => this.receive(text));
    channel.onClosed((reason) => {
      if (breachedBound(reason)) this.drop(reason);
    });
  }

  get alive(): boolean {
    return !this.ended;
  }

  /** The run whose turn is in progress on this runner, if any. */
  get currentRunId(): string | undefined {
    return this.turnRunId;
  }

  /** The request id of that run. */
  get currentRequestId(): string | undefined {
    return this.turnRequestId;
  }

  get position(): number {
    return this.settling?.delivering ?? 0;
  }

  settle(position: number): void {
    this.settling?.settle(position);
  }

  settleAll(): void {
    this.settling?.releaseAcks();
  }

  /** Binds the runner to its conversation's transcript store, as the coming turn's run masks it (before every turn). */
  bindSessionStore(store: ConversationSessionStore): void {
    this.store = store;
  }

  /**
   * The skills (already delivered to the workspace) the turns to come offer the agent. Only a
   * session's first turn can set them: a live session keeps the set it started with (`sessionSkills`).
   */
  offerSkills(names: string[]): void {
    this.offered = names;
  }

  /** The skills this runner's session was started with; undefined before its first turn. */
  get sessionSkills(): string[] | undefined {
    return this.started;
  }

  /** Runs one user turn; `onEvent` sees every agent event up to and including the `result`. */
  runTurn(turn: TurnRequest, onEvent: (event: AgentEvent) => void): Promise<TurnOutcome> {
    if (this.onTurnEnd) throw new Error('a turn is already running on this runner');
    if (this.ended) return Promise.resolve({ kind: 'crashed', error: 'runner is not running' });
    return this.follow(turn, onEvent, () => {
      const skills = turn.skills ?? this.offered;
      this.started ??= skills;
      this.send({ type: 'turn', content: turn.content, env: turn.env, resume: turn.resume, skills });
    });
  }

  /**
   * Follows the turn already in progress on a runner taken over from a replica that died: its lines
   * (those replayed first) go to `onEvent` as `runTurn`'s would; nothing is sent.
   */
  continueTurn(
    turn: Pick<TurnRequest, 'runId' | 'requestId' | 'onApprovalRequest'>,
    onEvent: (event: AgentEvent) => void,
  ): Promise<TurnOutcome> {
    if (this.onTurnEnd) throw new Error('a turn is already running on this runner');
    // Its session started with the skills offered for it (see offerSkills), on the replica that died.
    this.started ??= this.offered;
    return this.follow(turn, onEvent, () => {
      const backlog = this.backlog ?? [];
      this.backlog = undefined;
      for (const text of backlog) this.accept(text);
      // Ended while its lines waited (they are read first): the turn ends as a live one would have.
      if (this.ended) this.finishTurn({ kind: 'crashed', error: this.endReason });
    });
  }

  /** Takes the turn's events and calls from now on (the lines stay with the runner until settled), then `begin`s it. */
  private follow(
    turn: Pick<TurnRequest, 'runId' | 'requestId' | 'onApprovalRequest'>,
    onEvent: (event: AgentEvent) => void,
    begin: () => void,
  ): Promise<TurnOutcome> {
    return new Promise<TurnOutcome>((resolve) => {
      this.onEvent = onEvent;
      this.onTurnEnd = resolve;
      this.turnRunId = turn.runId;
      this.turnRequestId = turn.requestId;
      this.onApprovalRequest = turn.onApprovalRequest;
      this.turnBytes = 0;
      this.settling?.holdAcks();
      begin();
    });
  }

  async deliverSkills(skills: RunSkill[]): Promise<void> {
    await this.call(Number.POSITIVE_INFINITY, (opId) => [{ type: 'skills', op_id: opId, skills: wireSkills(skills) }]);
  }

  async exportWorkspace(options: WorkspaceExportOptions = {}): Promise<Buffer> {
    const maxBytes = options.maxBytes ?? DEFAULT_WORKSPACE_MAX_BYTES;
    const pieces = await this.call(maxBytes, (opId) => [
      { type: 'workspace_export', op_id: opId, max_bytes: maxBytes, exclude: options.exclude },
    ]);
    return Buffer.concat(pieces);
  }

  async importWorkspace(archive: Buffer): Promise<void> {
    if (archive.length === 0) return;
    await this.call(Number.POSITIVE_INFINITY, (opId) => {
      const lines: ServerCommand[] = [];
      for (let at = 0; at < archive.length; at += ARCHIVE_PIECE_BYTES) {
        const piece = archive.subarray(at, at + ARCHIVE_PIECE_BYTES);
        lines.push({
          type: 'workspace_import',
          op_id: opId,
          data: piece.toString('base64'),
          last: at + ARCHIVE_PIECE_BYTES >= archive.length,
        });
      }
      return lines;
    });
  }

  kill(): Promise<void> {
    if (!this.ended) this.stopRunner();
    return this.exit;
  }

  /** The runner has ended (its process exited, its link closed): a turn in progress ends `crashed` with `error`. */
  end(error: string): void {
    if (this.ended) return;
    this.ended = true;
    this.failReadyWith(new Error(error));
    this.endReason = error;
    this.finishTurn({ kind: 'crashed', error });
    for (const op of this.ops.values()) op.reject(new Error(error));
    this.ops.clear();
    this.markExited();
    this.markSpoke();
  }

  /** The runner broke a bound: it is stopped, and a turn in progress ends `crashed` saying which. */
  private drop(reason: string): void {
    if (this.ended) return;
    this.logger.warn({ runner_id: this.id, reason }, 'runner dropped');
    this.end(`the runner was dropped: ${reason}`);
    this.stopRunner();
  }

  /** The runner did not come up (its host could not start it), though it may not have ended. */
  protected failReady(error: Error): void {
    this.failReadyWith(error);
  }

  /** Sends a server call's lines; resolves with the archive pieces it returned, once the runner says it is done. */
  private call(maxBytes: number, lines: (opId: number) => ServerCommand[]): Promise<Buffer[]> {
    if (this.ended) return Promise.reject(new Error('runner is not running'));
    const opId = this.nextOpId++;
    return new Promise<Buffer[]>((resolve, reject) => {
      this.ops.set(opId, { resolve, reject, pieces: [], bytes: 0, maxBytes });
      for (const line of lines(opId)) this.send(line);
    });
  }

  private receive(text: string): void {
    if (this.backlog && !isReadyLine(text)) {
      this.backlog.push(text);
      return;
    }
    if (!this.ended) this.accept(text);
  }

  /** A runner line, read: the lines of a turn taken over are, even when the runner ended while they waited. */
  private accept(text: string): void {
    const bytes = Buffer.byteLength(text);
    if (this.onTurnEnd) this.turnBytes += bytes;
    if (this.turnBytes + this.callBytes > this.bounds.maxBufferedBytes) {
      this.drop(`it made this side hold more than ${this.bounds.maxBufferedBytes} bytes`);
      return;
    }
    let line: AgentEvent;
    try {
      line = JSON.parse(text) as AgentEvent;
    } catch {
      this.logger.warn({ runner_id: this.id }, 'runner wrote a line that is not JSON');
      return;
    }
    if (isRunnerLine(line)) this.handleRunnerLine(line, bytes);
    else this.handleAgentEvent(line);
  }

  /** Counts a runner's call until `answered` settles; a runner with too many open is dropped. */
  private track(bytes: number, answered: Promise<unknown>): void {
    this.callsInFlight += 1;
    this.callBytes += bytes;
    void answered.finally(() => {
      this.callsInFlight -= 1;
      this.callBytes -= bytes;
    });
    if (this.callsInFlight > MAX_CALLS_IN_FLIGHT) this.drop(`it has more than ${MAX_CALLS_IN_FLIGHT} calls in flight`);
  }

  private handleAgentEvent(event: AgentEvent): void {
    this.markSpoke();
    this.onEvent?.(event);
    if (event.type === 'result') this.finishTurn({ kind: 'result' });
  }

  private finishTurn(outcome: TurnOutcome): void {
    const done = this.onTurnEnd;
    this.onEvent = undefined;
    this.onTurnEnd = undefined;
    this.turnRunId = undefined;
    this.turnRequestId = undefined;
    this.onApprovalRequest = undefined;
    done?.(outcome);
  }

  private handleRunnerLine(line: RunnerLine, bytes: number): void {
    switch (line.type) {
      case 'runner_ready':
        this.markReady();
        return;
      case 'runner_error':
        this.logger.warn({ runner_id: this.id, error: line.error }, 'runner failed');
        this.finishTurn({ kind: 'crashed', error: line.error });
        return;
      case 'runner_session_load': {
        const store = this.store;
        const answered = (store ? store.load(line.key) : Promise.resolve(null)).then(
          (entries) => this.send({ type: 'session_entries', request_id: line.request_id, entries }),
          (error: unknown) => {
            this.logger.error({ err: error, runner_id: this.id }, 'loading a session transcript failed');
            this.send({ type: 'session_entries', request_id: line.request_id, entries: null });
          },
        );
        this.track(bytes, answered);
        return;
      }
      case 'runner_session_append': {
        const store = this.store;
        const answered = (store ? store.append(line.key, line.entries) : Promise.resolve()).then(
          () => this.send({ type: 'session_ack', request_id: line.request_id }),
          (error: unknown) => {
            this.logger.error({ err: error, runner_id: this.id }, 'mirroring a session transcript failed');
            this.send({ type: 'session_ack', request_id: line.request_id, error: 'store failed' });
          },
        );
        this.track(bytes, answered);
        return;
      }
      case 'runner_approval_request':
        this.track(bytes, this.answerApprovalRequest(line));
        return;
      case 'runner_workspace_chunk': {
        const op = this.ops.get(line.op_id);
        if (!op) return;
        const piece = Buffer.from(line.data, 'base64');
        op.bytes += piece.length;
        // The runner enforces the cap too; this side does not trust it to.
        if (op.bytes > op.maxBytes) {
          this.ops.delete(line.op_id);
          op.reject(new Error(`the workspace archive exceeds ${op.maxBytes} bytes`));
          return;
        }
        op.pieces.push(piece);
        return;
      }
      case 'runner_op_done': {
        const op = this.ops.get(line.op_id);
        this.ops.delete(line.op_id);
        if (line.error) op?.reject(new Error(line.error));
        else op?.resolve(op.pieces);
        return;
      }
    }
  }

  private answerApprovalRequest(line: Extract<RunnerLine, { type: 'runner_approval_request' }>): Promise<void> {
    if (this.approvalsAsked.has(line.request_id)) return Promise.resolve();
    this.approvalsAsked.add(line.request_id);
    const handler = this.onApprovalRequest;
    const answer = handler
      ? handler(line.input).catch((error: unknown) => {
          this.logger.error({ err: error, runner_id: this.id }, 'raising an approval failed');
          return { text: 'The platform could not raise the approval.', isError: true };
        })
      : Promise.resolve({ text: 'Approvals are not available outside a run.', isError: true });
    return answer.then(({ text, isError }) => this.send({ type: 'approval_result', request_id: line.request_id, text, is_error: isError }));
  }

  private send(command: ServerCommand): void {
    if (!this.ended) this.channel.send(JSON.stringify(command));
  }
}

/** The runner's `runner_ready` line (answered at once, even while a turn taken over waits for `continueTurn`). */
function isReadyLine(text: string): boolean {
  if (!text.includes('runner_ready')) return false;
  try {
    return (JSON.parse(text) as { type?: unknown }).type === 'runner_ready';
  } catch {
    return false;
  }
}
