/**
 * A runner as the run manager drives it, whatever hosts it: a turn in, the agent's events out, the
 * conversation's transcript store and approvals answered on the way. `LocalRunner` (a child process
 * in bubblewrap on this node) implements it; a runner reached over the network will too.
 */
import type { ConversationSessionStore } from './session-store.js';

export type AgentEvent = Record<string, unknown>;

export interface TurnRequest {
  content: string;
  env?: Record<string, string> | undefined;
  resume?: string | undefined;
  skills?: string[] | undefined;
  /** The run (assistant message) this turn belongs to: the runner's egress credential stands for it until the turn ends. */
  runId?: string | undefined;
  /** Answers the agent's `request_approval` calls of this turn (the tool result it sees); refused when absent. */
  onApprovalRequest?: ((input: unknown) => Promise<ApprovalAnswer>) | undefined;
}

export interface ApprovalAnswer {
  text: string;
  isError: boolean;
}

export type TurnOutcome = { kind: 'result' } | { kind: 'crashed'; error: string };

export interface Runner {
  /** This runner's id (also the user of its egress credential). */
  readonly id: string;
  /** Still running (a dead runner is never reused). */
  readonly alive: boolean;
  /** The run whose turn is in progress on this runner, if any. */
  readonly currentRunId: string | undefined;
  /** Binds the runner to its conversation's transcript store, as the coming turn's run masks it (before every turn). */
  bindSessionStore(store: ConversationSessionStore): void;
  /** The skills the turns to come offer the agent; only a session's first turn can set them. */
  offerSkills(names: string[]): void;
  /** The skills this runner's session was started with; undefined before its first turn. */
  readonly sessionSkills: string[] | undefined;
  /** Runs one user turn; `onEvent` sees every agent event up to and including the `result`. */
  runTurn(turn: TurnRequest, onEvent: (event: AgentEvent) => void): Promise<TurnOutcome>;
  kill(): Promise<void>;
}
