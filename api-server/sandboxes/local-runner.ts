import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { isRunnerLine, type RunnerLine, type ServerCommand } from '../../sandbox/protocol.js';
import type { AgentEvent, Runner, TurnOutcome, TurnRequest } from './runner.js';
import type { ConversationSessionStore } from './session-store.js';

/**
 * One runner process (inside its sandbox) as the API server sees it: send a turn, receive the agent's
 * events until its `result`, answer the runner's session-store calls. A runner serves one
 * conversation at a time; it is bound to one at claim and never reused for another.
 */
export class LocalRunner implements Runner {
  private readonly child: ChildProcess;
  private readonly stderrTail: string[] = [];
  private onEvent: ((event: AgentEvent) => void) | undefined;
  private onTurnEnd: ((outcome: TurnOutcome) => void) | undefined;
  private onApprovalRequest: TurnRequest['onApprovalRequest'];
  private store: ConversationSessionStore | undefined;
  private exited = false;
  private turnRunId: string | undefined;
  /** The skills the next turn offers (see offerSkills), and those its session was started with. */
  private offered: string[] | undefined;
  private started: string[] | undefined;
  readonly ready: Promise<void>;
  readonly exit: Promise<void>;

  constructor(
    readonly id: string,
    command: { file: string; args: string[]; env: Record<string, string>; cwd: string },
    private readonly logger: Logger,
  ) {
    // Its own process group: a Ctrl-C meant for the server (which shuts down gracefully) must not kill
    // the runners of the turns it lets finish. They still die with the server (bwrap --die-with-parent).
    this.child = spawn(command.file, command.args, { cwd: command.cwd, env: command.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let markReady: () => void = () => {};
    let failReady: (error: Error) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => undefined);
    this.exit = new Promise<void>((resolve) => {
      const ended = (error: string) => {
        if (this.exited) return;
        this.exited = true;
        failReady(new Error(error));
        this.finishTurn({ kind: 'crashed', error });
        resolve();
      };
      this.child.once('exit', (code, signal) => ended(`runner exited (${signal ?? code}): ${this.stderrTail.join('').slice(-2000)}`));
      // A process that could not be started (no such binary) never exits: it ends here, or killing it would wait forever.
      this.child.once('error', (error) => {
        if (this.child.pid === undefined) ended(`runner could not be started: ${error.message}`);
        else failReady(error);
      });
    });
    this.child.stdin?.on('error', () => undefined);

    createInterface({ input: this.child.stdout!, crlfDelay: Infinity }).on('line', (text) => {
      let line: AgentEvent;
      try {
        line = JSON.parse(text) as AgentEvent;
      } catch {
        this.logger.warn({ runner_id: this.id }, 'runner wrote a line that is not JSON');
        return;
      }
      if (isRunnerLine(line)) this.handleRunnerLine(line, markReady);
      else this.handleAgentEvent(line);
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail.push(chunk.toString('utf8'));
      if (this.stderrTail.length > 20) this.stderrTail.shift();
    });
  }

  get alive(): boolean {
    return !this.exited;
  }

  /** The run whose turn is in progress on this runner, if any. */
  get currentRunId(): string | undefined {
    return this.turnRunId;
  }

  /** Binds the runner to its conversation's transcript store, as the coming turn's run masks it (before every turn). */
  bindSessionStore(store: ConversationSessionStore): void {
    this.store = store;
  }

  /**
   * The skills (already materialised in the workspace) the turns to come offer the agent. Only a
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
    if (this.exited) return Promise.resolve({ kind: 'crashed', error: 'runner is not running' });
    return new Promise<TurnOutcome>((resolve) => {
      this.onEvent = onEvent;
      this.onTurnEnd = resolve;
      this.turnRunId = turn.runId;
      this.onApprovalRequest = turn.onApprovalRequest;
      const skills = turn.skills ?? this.offered;
      this.started ??= skills;
      this.send({ type: 'turn', content: turn.content, env: turn.env, resume: turn.resume, skills });
    });
  }

  kill(): Promise<void> {
    if (!this.exited) this.child.kill('SIGKILL');
    return this.exit;
  }

  private handleAgentEvent(event: AgentEvent): void {
    this.onEvent?.(event);
    if (event.type === 'result') this.finishTurn({ kind: 'result' });
  }

  private finishTurn(outcome: TurnOutcome): void {
    const done = this.onTurnEnd;
    this.onEvent = undefined;
    this.onTurnEnd = undefined;
    this.turnRunId = undefined;
    this.onApprovalRequest = undefined;
    done?.(outcome);
  }

  private handleRunnerLine(line: RunnerLine, markReady: () => void): void {
    switch (line.type) {
      case 'runner_ready':
        markReady();
        return;
      case 'runner_error':
        this.logger.warn({ runner_id: this.id, error: line.error }, 'runner failed');
        this.finishTurn({ kind: 'crashed', error: line.error });
        return;
      case 'runner_session_load': {
        const store = this.store;
        void (store ? store.load(line.key) : Promise.resolve(null)).then(
          (entries) => this.send({ type: 'session_entries', request_id: line.request_id, entries }),
          (error: unknown) => {
            this.logger.error({ err: error, runner_id: this.id }, 'loading a session transcript failed');
            this.send({ type: 'session_entries', request_id: line.request_id, entries: null });
          },
        );
        return;
      }
      case 'runner_approval_request':
        this.answerApprovalRequest(line);
        return;
      case 'runner_session_append': {
        const store = this.store;
        void (store ? store.append(line.key, line.entries) : Promise.resolve()).then(
          () => this.send({ type: 'session_ack', request_id: line.request_id }),
          (error: unknown) => {
            this.logger.error({ err: error, runner_id: this.id }, 'mirroring a session transcript failed');
            this.send({ type: 'session_ack', request_id: line.request_id, error: 'store failed' });
          },
        );
        return;
      }
    }
  }

  private answerApprovalRequest(line: Extract<RunnerLine, { type: 'runner_approval_request' }>): void {
    const handler = this.onApprovalRequest;
    const answer = handler
      ? handler(line.input).catch((error: unknown) => {
          this.logger.error({ err: error, runner_id: this.id }, 'raising an approval failed');
          return { text: 'The platform could not raise the approval.', isError: true };
        })
      : Promise.resolve({ text: 'Approvals are not available outside a run.', isError: true });
    void answer.then(({ text, isError }) =>
      this.send({ type: 'approval_result', request_id: line.request_id, text, is_error: isError }),
    );
  }

  private send(command: ServerCommand): void {
    if (!this.exited) this.child.stdin?.write(`${JSON.stringify(command)}\n`);
  }
}
