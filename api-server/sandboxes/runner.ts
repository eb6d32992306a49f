/**
 * A runner as the run manager and the providers drive it, whatever hosts it: a turn in, the agent's
 * events out, the conversation's transcript store and approvals answered on the way, and the skills
 * and workspace state it needs handed over the same connection (a runner shares no disk with the API
 * server). `ChannelRunner` implements it over any channel; `LocalRunner` (a child process in
 * bubblewrap on this node, over stdio) and `connectRemoteRunner` (a runner in a pod, over TCP) build one.
 */
import type { RunSkill } from '../skills/materialise.js';
import type { ConversationSessionStore } from './session-store.js';

export type AgentEvent = Record<string, unknown>;

export interface TurnRequest {
  content: string;
  env?: Record<string, string> | undefined;
  resume?: string | undefined;
  skills?: string[] | undefined;
  /** The run (assistant message) this turn belongs to: the runner's egress credential stands for it until the turn ends. */
  runId?: string | undefined;
  /** The id of the API request that started the run, for the lines logged about the turn's calls out. */
  requestId?: string | undefined;
  /** Answers the agent's `request_approval` calls of this turn (the tool result it sees); refused when absent. */
  onApprovalRequest?: ((input: unknown) => Promise<ApprovalAnswer>) | undefined;
}

export interface ApprovalAnswer {
  text: string;
  isError: boolean;
}

export type TurnOutcome = { kind: 'result' } | { kind: 'crashed'; error: string };

export interface WorkspaceExportOptions {
  /** The archive may not be larger (default DEFAULT_WORKSPACE_MAX_BYTES): the export fails beyond it. */
  maxBytes?: number;
  /** Paths relative to the workspace to leave out (e.g. a HOME kept inside it). */
  exclude?: string[];
}

/** What a workspace archive may weigh unless told otherwise. */
export const DEFAULT_WORKSPACE_MAX_BYTES = 100 * 1024 * 1024;

/**
 * What a runner can make the API server hold, past which it is dropped (its turn ends `crashed`): the
 * longest line it may send, and the bytes held on its behalf at once: its turn's lines (a run keeps
 * them in memory until it ends, for the clients following it), the calls it has in flight, and what
 * was sent to it that it has not read.
 */
export interface RunnerBounds {
  maxLineBytes: number;
  maxBufferedBytes: number;
}

export const DEFAULT_RUNNER_BOUNDS: RunnerBounds = { maxLineBytes: 16 * 1024 * 1024, maxBufferedBytes: 256 * 1024 * 1024 };

export interface Runner {
  /** This runner's id (also the user of its egress credential). */
  readonly id: string;
  /** Still running (a dead runner is never reused). */
  readonly alive: boolean;
  /** The run whose turn is in progress on this runner, if any. */
  readonly currentRunId: string | undefined;
  /** The request id of that run, when it was given one. */
  readonly currentRequestId: string | undefined;
  /** Binds the runner to its conversation's transcript store, as the coming turn's run masks it (before every turn). */
  bindSessionStore(store: ConversationSessionStore): void;
  /** The skills the turns to come offer the agent; only a session's first turn can set them. */
  offerSkills(names: string[]): void;
  /** The skills this runner's session was started with; undefined before its first turn. */
  readonly sessionSkills: string[] | undefined;
  /** Runs one user turn; `onEvent` sees every agent event up to and including the `result`. */
  runTurn(turn: TurnRequest, onEvent: (event: AgentEvent) => void): Promise<TurnOutcome>;
  /**
   * Follows the turn in progress on a runner taken over from a replica that died (see
   * `SandboxProvider.resumeRunner`): its lines the dead replica had not stored come first.
   */
  continueTurn(turn: Pick<TurnRequest, 'runId' | 'onApprovalRequest'>, onEvent: (event: AgentEvent) => void): Promise<TurnOutcome>;
  /**
   * The number of the runner's line being delivered (inside `onEvent`): where the runner would replay
   * from for a replica taking its turn over. 0 when its channel does not keep lines (a local child).
   */
  readonly position: number;
  /** The turn's lines up to `position` are stored: the runner need not keep them for a takeover. */
  settle(position: number): void;
  /** Every line received counts as stored again (the run's lines are all stored). */
  settleAll(): void;
  /** Replaces the skills folder of the runner's workspace (`.claude/skills/`) with these, before a turn. */
  deliverSkills(skills: RunSkill[]): Promise<void>;
  /** The workspace (the agent's cwd) as a gzipped tar, to keep for the conversation when the runner goes. */
  exportWorkspace(options?: WorkspaceExportOptions): Promise<Buffer>;
  /** Unpacks an archive from `exportWorkspace` into the workspace (before the first turn of a new runner). */
  importWorkspace(archive: Buffer): Promise<void>;
  kill(): Promise<void>;
}
