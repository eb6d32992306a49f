/**
 * What the policy knows of one runner: its state in the life transitions.ts describes, whom it
 * serves, and the two clocks the policy reads (last use for evictions, the end of a warm hold). A
 * plain record both the policy and the transitions take, so neither needs the other to name it.
 */

export type RunnerState = 'starting' | 'pooled' | 'busy' | 'held' | 'released';

export interface RunnerView {
  id: string;
  agentType: string;
  state: RunnerState;
  /** The conversation a busy or held runner serves. */
  conversationId?: string | undefined;
  tenantId?: string | undefined;
  /** Last time a turn ended on it (ms); the LRU key for evictions. */
  lastUsedAt: number;
  /** For held runners: when the idle TTL lapses (ms). */
  heldUntil?: number | undefined;
}
