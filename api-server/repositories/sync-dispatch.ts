/**
 * Where a claimed sync attempt runs when not in this process: under Kubernetes, a RepositorySync the
 * controller runs as a Job (kubernetes-sync-dispatch.ts). The attempt's Job hands its result to the
 * API server (sync-report-server.ts), which ends the claim; the dispatch answers for the attempts that
 * could not (a Job that died).
 */
import type { RepositoryRow } from './repositories.repository.js';

export interface SyncDispatch {
  /** Hands a claimed attempt to whatever runs it. */
  hand(repository: RepositoryRow, claim: string): Promise<void>;
  /**
   * Why the attempt with this claim ended without writing its outcome (its Job was killed, evicted or
   * stopped at its deadline); undefined while it runs, or when that is not known.
   */
  failureOf(repositoryId: string, claim: string): Promise<string | undefined>;
  /** How long an attempt may stay `syncing` before its claim counts as orphaned, whichever node handed it. */
  readonly attemptDeadlineMs: number;
  /** The repository is gone: what the runner keeps for it (its RepositorySync, Jobs, Secrets) goes too. */
  forget(repositoryId: string): Promise<void>;
}
