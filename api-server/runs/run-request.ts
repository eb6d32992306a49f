import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import type { ProblemError } from '../core/problems.js';
import type { Lease } from '../sandboxes/provider.js';
import type { BusyPlaceRequest } from './busy-caps.js';
import type { StreamLine } from './run-stream.js';
import type { RunSecret } from '../../egress-proxy/secret-binding.js';

/** What a send asks of a run: the turn, where its lines start, and what it may see (secrets, skills). */
export interface RunRequest {
  conversation: ScopedConversationRow;
  assistantMessageId: string;
  content: string;
  /** The message's `env`, shown to the agent with the turn. */
  env?: Record<string, string> | undefined;
  onCapacity: 'reject' | 'hold';
  /** Already admitted, the runner still getting ready (on_capacity=reject is admitted before anything is persisted). */
  lease?: Promise<Lease> | undefined;
  /** Stored held for a busy-sandbox place (on_capacity=hold over a tenant's or user's cap): the run waits for one first. */
  busyPlace?: BusyPlaceRequest | undefined;
  /** Lines that open the stream (the `conversation` line of create and upsert). */
  leadingLines: StreamLine[];
  /** Whether the filler cascade enables a quick acknowledgement ahead of the agent. */
  filler: boolean;
  /** `{base_url}` for problem types in `error` lines, and the request that started the run. */
  baseUrl: string;
  requestId: string;
  /** The run's resolved secrets (alias to value): masked out of everything the run emits or stores. */
  secrets: ReadonlyMap<string, RunSecret>;
  /** A platform refusal found before anything ran (missing-secret): the run ends with it at once. */
  refusal?: ProblemError | undefined;
  /** The run's effective skills (snapshot, narrowed by the conversation's selection and the message's skill_ids). */
  skillIds: string[];
}

export type RunOutcome = { status: 'completed' | 'failed'; problem?: ProblemError };

/** A run whose node died, claimed by this one (see takeover.ts), and how far it had got. */
export interface TakenOverRun {
  /**
   * The run as its send asked for it (without the filler's acknowledgement): its turn goes on on the
   * runner, or, when it had not reached the runner (`after` 0), is started again from its message.
   */
  request: RunRequest;
  /** The lines stored by the node that died, numbered from 1. */
  stored: StreamLine[];
  /** The highest runner line those lines came from: the runner replays what came after; 0 when none did. */
  after: number;
}
