/**
 * The sandbox provider seam: what the run manager and the message routes need of whatever hosts
 * runners. `local` (LocalSandboxProvider: bubblewrap children of this node) and `kubernetes`
 * (KubernetesSandboxProvider: Sandbox resources the controller turns into pods) implement it;
 * ACIS_SANDBOX_PROVIDER chooses.
 */
import type { AcquireRequest as PlacementRequest, RunnerView } from '../../sandbox-policy/policy.js';
import type { Runner } from './runner.js';

/** What the capacity policy places (agent type, conversation), and what the provider needs beyond it. */
export interface AcquireRequest extends PlacementRequest {
  tenantId: string;
  /**
   * The run (assistant message) the runner is acquired for. A provider whose runners' egress
   * credentials are recorded for other processes binds the credential to it as soon as the runner is
   * known, beside the connection, rather than on the turn's way out.
   */
  runId?: string | undefined;
  /** The request that started the run, named on what the provider creates for it (a Sandbox's annotation). */
  requestId?: string | undefined;
}

export interface WaitOptions {
  /** false: fail at once with `CapacityExhausted` when no runner is free (`on_capacity=reject`). */
  wait: boolean;
  signal?: AbortSignal;
  onQueued?: (position: number, retryHintSeconds: number) => void;
}

export interface Lease {
  runner: Runner;
  /** True when this runner served the conversation's previous turn (a live session): no resume needed. */
  continuing: boolean;
  /**
   * Where the provider itself bounds what a turn may write (the local provider's workspace size
   * limit; on a cluster the kubelet does it): watches the runner for the turn, calls `onExceeded`
   * with what was passed, and returns the stop.
   */
  watchLimits?: (onExceeded: (detail: string) => void) => () => void;
}

/**
 * A place granted to a request (capacity is reserved for it: the answer `on_capacity=reject` waits
 * for), with its runner still getting ready: what needs only the place (storing the turn's messages)
 * runs meanwhile.
 */
export interface Admission {
  /** The runner once it is ready; rejects as `acquire` would (the sandbox could not start, ...). */
  lease: Promise<Lease>;
}

/** The admission of a lease already under way (its rejection is the awaiting caller's to handle). */
export function admission(lease: Promise<Lease>): Admission {
  lease.catch(() => undefined);
  return { lease };
}

export interface ReleaseOptions {
  /** Keep the runner warm for the conversation (warm mode), within the tenant's cap. */
  hold?: { idleTtlSeconds: number; maxConcurrentWarm: number };
  /** The runner misbehaved: never reuse it. */
  broken?: boolean;
  /** The conversation no longer exists: its workspace is not saved. */
  discard?: boolean;
  /**
   * Another node took the run over (this one was taken for dead): its runner is that node's now.
   * This node forgets it without touching it (no save, no delete, no state shown).
   */
  abandon?: boolean;
}

export class CapacityExhausted extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super('no sandbox available');
  }
}

/** This node cannot start runners at all (see sandbox-runtime.ts); the reason says what is missing and how to get it. */
export class SandboxUnavailable extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

/**
 * Sandbox state changes the conversation record must show (`runtime.sandbox_state`, `expires_at`).
 * Awaited, so a turn's terminal line goes out only once its conversation shows the new state.
 */
export type SandboxStateListener = (conversationId: string, state: { warm: boolean; expiresAt: Date | null }) => Promise<void>;

/**
 * The runners' only route out, as the egress proxy (in process, or standalone through the resolve
 * listener) sees them. A credential is a runner's (user: runner id, password: a token given at spawn)
 * and stands for the run whose turn is in progress on it, so exactly that run's values are
 * substituted; at any other time it stands for nothing.
 */
export interface EgressCredentials {
  /** The run a runner's egress credential stands for now, if any. */
  egressRun(runnerId: string, token: string): string | undefined | Promise<string | undefined>;
  /**
   * Ends the run in progress on the runner (already authenticated) for a secret it lacks, or, with
   * `destination`, for a bound secret it sent toward a destination outside its hosts, wherever that run is hosted.
   */
  abortMissing(runnerId: string, alias: string, destination?: string): Promise<void>;
  /**
   * The egress proxy refused a request of the runner (already authenticated): recorded where operators
   * look for its sandbox (kubernetes: an Event on its Sandbox, aggregated), if the provider has such a place.
   */
  refused?(runnerId: string, refusal: EgressRefusalReport): void;
}

/** A refused egress request as the proxy tells it: never a value, only the alias, the destination and why. */
export interface EgressRefusalReport {
  outcome: 'destination-refused' | 'missing-secret' | 'secret-destination-denied';
  destination: string;
  detail: string;
}

/** The egress proxy runners go through: its port on this host and the CA it terminates TLS with. */
export interface EgressEndpoint {
  port: number;
  caCertificatePem: string;
}

/** How a run is ended for a secret missing at the egress proxy. */
export interface MissingSecretAbort {
  /** Ends a run this process hosts. */
  here(runId: string, alias: string, destination: string | undefined): void;
  /** Has the replica hosting the run end it (absent with one node only: the embedded database). */
  elsewhere?: ((runId: string, alias: string, destination: string | undefined) => Promise<void>) | undefined;
}

export interface SandboxProvider {
  /** Set when this node cannot start runners at all: what is missing and how to get it. */
  readonly unavailableReason: string | undefined;
  /** A runner for the conversation: its held one, a pooled one, or a new one; waits or refuses at capacity. */
  acquire(request: AcquireRequest, options: WaitOptions): Promise<Lease>;
  /**
   * `acquire` in two steps: resolves once the request has its place (or rejects with
   * `CapacityExhausted`, as `acquire` does at capacity), before the runner is ready.
   */
  admit(request: AcquireRequest, options: WaitOptions): Promise<Admission>;
  /**
   * The runner of a run whose hosting replica died, taken over mid-turn: the conversation's runner,
   * connected as the new holder of its link, replaying its lines after `after` (the highest runner
   * line the dead replica stored). Rejects when the runner is gone or cannot replay from there.
   * Absent where runners die with their replica (local): such runs can only fail.
   */
  resumeRunner?(request: AcquireRequest, after: number): Promise<Lease>;
  /** Gives the runner back: held warm for the conversation until a deadline, recycled, or discarded. */
  release(lease: Lease, options: ReleaseOptions): Promise<{ heldUntil: Date | null }>;
  /** The conversation is gone: its held runner and saved state go too. */
  discardConversation(conversationId: string): Promise<void>;
  /** Recycles holds whose deadline has passed (the heartbeat's safety net behind the timers). */
  expireLapsedHolds(): Promise<void>;
  /** Whose runs its runners' egress credentials stand for, and how such a run is ended for a missing secret. */
  egressCredentials(abort: MissingSecretAbort): EgressCredentials;
  /** The runners as the capacity policy sees them. */
  views(): RunnerView[];
  /** Acquires waiting for capacity now. */
  queuedRuns(): number;
  stop(): Promise<void>;
}
