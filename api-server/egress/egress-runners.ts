/**
 * The runners' only route out, as the egress proxy (in process, or standalone through the resolve
 * listener) sees them. A credential is a runner's (user: runner id, password: a token given at spawn)
 * and stands for the run whose turn is in progress on it, so exactly that run's values are
 * substituted; at any other time it stands for nothing.
 */
export interface EgressRunners {
  /** The run a runner's egress credential stands for now, if any. */
  egressRun(runnerId: string, token: string): string | undefined | Promise<string | undefined>;
  /** Ends the run in progress on the runner (already authenticated) for a secret it lacks, wherever that run is hosted. */
  abortMissing(runnerId: string, alias: string): Promise<void>;
}
