import type { Logger } from 'pino';
import { API_VERSION, REASONS, SANDBOX, type Sandbox } from '../../../controller/api/v1alpha1.js';
import { placeholderFor } from '../../../egress-proxy/placeholder.js';
import { retryHintSeconds, type RunnerView } from '../../../sandbox-policy/policy.js';
import { holdSpec, newSandbox, sandboxName } from './decisions.js';
import { type RunnerAddress, type SandboxStanding, standingOf } from '../../../controller/api/sandbox-status.js';
import { TYPICAL_TURN_SECONDS, untilReady } from './readiness.js';
import { EgressRecordingRunner, type RunnerRecords } from './records.js';
import type { SandboxClient } from './sandboxes.js';
import {
  type AcquireRequest,
  type Admission,
  admission,
  CapacityExhausted,
  type EgressCredentials,
  type EgressRefusalReport,
  type Lease,
  type MissingSecretAbort,
  type ReleaseOptions,
  type SandboxProvider,
  type SandboxStateListener,
  type WaitOptions,
} from '../provider.js';
import type { Runner } from '../runner.js';
import { type RegisteredRunner, RunnerRegistry } from '../runner-registry.js';

/** Where a ready Sandbox's runner listens, and the token it wants in the hello. */
export interface RunnerEndpoint {
  /** The runner's id on this side: its pod's name, which is also the user of its egress credential. */
  id: string;
  host: string;
  port: number;
  token: string;
  /** Take the runner's link over mid-turn, resuming after this runner line (`SandboxProvider.resumeRunner`). */
  takeoverAfter?: number | undefined;
}

/** Opens the control connection to a runner in a pod; resolves once the runner accepted it and is ready. */
export type RunnerConnector = (endpoint: RunnerEndpoint) => Promise<Runner>;

export interface KubernetesProviderOptions {
  client: SandboxClient;
  connect: RunnerConnector;
  logger: Logger;
  onSandboxState: SandboxStateListener;
  /** Shared with the other replicas: egress credentials' runs, workspaces between sandboxes. Absent: neither is kept. */
  records?: RunnerRecords;
  /** How long a Sandbox may take from create to Ready before the turn fails (the controller's own start timeout normally answers first). */
  readyTimeoutMs: number;
  now?: () => number;
}

/** A workspace archive larger than this is not kept (the export fails and the next sandbox starts empty). */
const WORKSPACE_MAX_BYTES = 64 * 1024 * 1024;
/** The pod's HOME lives in its workspace; its files (config, transcripts) are the runner's, not the conversation's. */
const WORKSPACE_EXCLUDE = ['.home'];
/** Connecting to a Sandbox's runner: the found one, then a new one. */
const CONNECT_ATTEMPTS = 2;
/** How many times an acquire replaces an ended Sandbox that another replica keeps putting back. */
const MAX_CREATE_ATTEMPTS = 3;

interface Connected {
  runner: Runner;
  egressToken: string;
  /** The run's egress binding being written beside the connection (settled before the lease is given). */
  egressBound: Promise<void> | undefined;
}

/** A runner of this process; its egress token is the pod's, from its token Secret. */
interface Entry extends RegisteredRunner {
  /** The runner's Sandbox as last seen (the watch keeps it current). */
  sandbox: Sandbox;
}

/**
 * The `kubernetes` sandbox provider: a turn's runner lives in a pod the controller makes for a
 * `Sandbox` resource; this process writes the resource (create, the sliding `shutdownTime`, delete),
 * watches it and the runner pods until its runner is ready or it is refused, takes the runner's token
 * (read ahead while a pool pod waited, else from its Secret) and connects to the runner.
 *
 * Several API replicas share the cluster: a conversation's Sandbox has one name derived from its id
 * and carries its id as a label, so any replica finds it and none makes a second. Capacity is the
 * controller's: past the cluster's maximum a Sandbox is not admitted (`Admitted=False`,
 * `CapacityExhausted`); that is a refusal (`wait: false`) or a place in the controller's line,
 * announced as it moves (`wait: true`). A warm hold is the Sandbox kept with a moved `shutdownTime`;
 * the controller expires it then, or earlier for the tenant's warm cap, and this process sees it
 * through the watch. A Sandbox that ends while its runner is leased (pod killed, node lost) ends
 * the runner's turn: the run becomes a failed message with an error line. A runner outlives the
 * replica that connected to it: when that replica dies mid-turn, another takes the turn over
 * (`resumeRunner`).
 */
export class KubernetesSandboxProvider implements SandboxProvider {
  /** Leased and held runners of this process. */
  private readonly registry: RunnerRegistry<Entry>;
  /** Acquires waiting for a place in the cluster. */
  private queued = 0;
  private readonly now: () => number;
  private unsubscribe: (() => void) | undefined;
  private readonly stopping = new AbortController();

  constructor(private readonly options: KubernetesProviderOptions) {
    this.now = options.now ?? Date.now;
    this.registry = new RunnerRegistry({
      logger: options.logger,
      onSandboxState: options.onSandboxState,
      onHoldsLapsed: () => this.expireLapsedHolds(),
      now: this.now,
    });
  }

  readonly unavailableReason: string | undefined = undefined;

  async start(): Promise<void> {
    this.unsubscribe = this.options.client.subscribe((event, sandbox) => {
      const entry = this.registry.all().find((e) => e.sandbox.metadata.uid === sandbox.metadata.uid);
      if (!entry) return;
      if (event !== 'delete') entry.sandbox = sandbox;
      const standing: SandboxStanding =
        event === 'delete' ? { kind: 'ended', reason: 'Deleted', message: 'the Sandbox was deleted' } : standingOf(sandbox);
      const expired = event !== 'delete' && sandbox.status?.phase === 'Expired' && !sandbox.metadata.deletionTimestamp;
      if (standing.kind === 'ended') void this.lost(entry, standing, expired);
    });
    await this.options.client.start();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.unsubscribe?.();
    // Like the local provider: what this process held ends with it; the next message (on any replica) resumes cold.
    const ending = this.registry.all().map((entry) => ({ entry, save: entry.view.state === 'held' }));
    this.registry.stop();
    await Promise.all(ending.map(({ entry, save }) => this.dispose(entry, { save })));
    await this.options.client.stop();
  }

  /**
   * A runner pod's request may reach the proxy of any replica (or a standalone proxy asking any
   * replica): beyond this process's own runners, its credential is looked up in the records every
   * replica writes, and its run is ended on the replica hosting it (`abort.elsewhere`).
   */
  egressCredentials(abort: MissingSecretAbort): EgressCredentials {
    const { records } = this.options;
    return {
      egressRun: async (runnerId, token) => this.registry.egressRun(runnerId, token) ?? records?.egressRun(runnerId, token),
      abortMissing: async (runnerId, alias, destination) => {
        const here = this.registry.currentRun(runnerId);
        if (here) return void abort.here(here, alias, destination);
        const runId = await records?.runOf(runnerId);
        if (runId) await abort.elsewhere?.(runId, alias, destination);
      },
      refused: (runnerId, refusal) => this.recordRefusal(runnerId, refusal),
    };
  }

  /**
   * A Warning Event on the runner's Sandbox for a request the egress proxy refused, so `kubectl
   * describe sbx` says why a tool call failed. Aggregated per Sandbox and kind of refusal (a runner
   * can repeat them at will); a runner whose pod controls no Sandbox (a pool pod) has none to record.
   */
  private recordRefusal(runnerId: string, refusal: EgressRefusalReport): void {
    const { client } = this.options;
    const sandbox = this.registry.get(runnerId)?.sandbox.metadata ?? client.pods.sandboxOf(runnerId);
    if (!sandbox) return;
    const { reason, message } = refusalEvent(refusal);
    client.events.record(
      { apiVersion: API_VERSION, kind: SANDBOX.kind, metadata: { name: sandbox.name!, namespace: client.namespace, uid: sandbox.uid } },
      { type: 'Warning', reason, message },
    );
  }

  views(): RunnerView[] {
    return this.registry.views();
  }

  queuedRuns(): number {
    return this.queued;
  }

  async acquire(request: AcquireRequest, options: WaitOptions): Promise<Lease> {
    return (await this.admit(request, options)).lease;
  }

  /**
   * Admitted once the conversation's held runner is taken, or the controller has given its Sandbox a
   * place (for a pool pod's adoption, as soon as the adopted pod is seen); the token, the connection
   * and the workspace restore go on behind it.
   */
  async admit(request: AcquireRequest, options: WaitOptions): Promise<Admission> {
    await this.expireLapsedHolds();
    if (this.stopping.signal.aborted) throw new CapacityExhausted(retryHintSeconds(1, TYPICAL_TURN_SECONDS));
    const [held] = this.registry.heldFor(request.conversationId);
    if (held) {
      if (held.runner.alive && standingOf(held.sandbox).kind !== 'ended') {
        this.registry.resume(held);
        return admission(Promise.resolve({ runner: held.runner, continuing: true }));
      }
      await this.end(held, { save: false });
    }
    let markAdmitted: () => void = () => {};
    const admitted = new Promise<void>((resolve) => (markAdmitted = resolve));
    const lease = this.readyRunner(request, options, markAdmitted);
    // A refusal (or any failure) before the place was given rejects the admission itself.
    await Promise.race([admitted, lease]);
    return admission(lease);
  }

  /** The conversation's Sandbox made Ready, its runner connected and its kept workspace restored. */
  private async readyRunner(request: AcquireRequest, options: WaitOptions, onAdmitted: () => void): Promise<Lease> {
    // A workspace kept from the conversation's last sandbox: read while the sandbox gets ready.
    const savedWorkspace = this.options.records?.loadWorkspace(request.conversationId);
    savedWorkspace?.catch(() => undefined);
    let ready: Sandbox;
    let connected: Connected;
    for (let attempt = 1; ; attempt++) {
      let address: RunnerAddress;
      ({ sandbox: ready, address } = await untilReady(
        await this.sandboxFor(request),
        options,
        {
          client: this.options.client,
          logger: this.options.logger,
          readyTimeoutMs: this.options.readyTimeoutMs,
          stopping: this.stopping.signal,
          onQueuedChange: (delta) => (this.queued += delta),
        },
        onAdmitted,
      ));
      try {
        connected = await this.connectTo(address, request.runId);
        break;
      } catch (error) {
        // A runner we cannot use is no one's: deleted, so the next attempt (or turn) gets a new one. The
        // usual cause is another replica's live connection to a warm runner (a runner takes one API
        // connection at a time): the conversation then moves here and resumes from its transcript.
        await this.options.client.delete(ready);
        if (attempt >= CONNECT_ATTEMPTS) throw error;
        this.options.logger.warn(
          { err: error, sandbox: ready.metadata.name, request_id: request.requestId },
          'connecting to a runner failed; starting a new sandbox for the conversation',
        );
        await this.options.client.whenGone(ready);
      }
    }
    const entry = this.register(request, ready, connected);
    try {
      await connected.egressBound;
      const saved = await savedWorkspace;
      if (saved) await entry.runner.importWorkspace(saved);
    } catch (error) {
      await this.end(entry, { save: false });
      throw error;
    }
    return { runner: entry.runner, continuing: false };
  }

  /**
   * The conversation's runner, as the watch shows it, taken over from the replica that died while a
   * turn ran on it: its Sandbox must still stand and its pod serve. The run's egress binding is
   * written again (it names this run already, unless the dead replica never got to write it).
   */
  async resumeRunner(request: AcquireRequest, after: number): Promise<Lease> {
    const sandbox = this.options.client.cachedForConversation(request.conversationId);
    if (!sandbox || standingOf(sandbox).kind === 'ended') throw new Error('the conversation’s Sandbox is gone');
    const address = this.options.client.pods.servingFor(sandbox);
    if (!address) throw new Error(`Sandbox ${sandbox.metadata.name} has no ready runner pod`);
    const connected = await this.connectTo(address, request.runId, after);
    const entry = this.register(request, sandbox, connected);
    try {
      await connected.egressBound;
    } catch (error) {
      await this.end(entry, { save: false });
      throw error;
    }
    return { runner: entry.runner, continuing: true };
  }

  /** A connected runner becomes this process's, leased to the request's conversation. */
  private register(request: AcquireRequest, sandbox: Sandbox, connected: Connected): Entry {
    const { egressToken } = connected;
    const runner = this.options.records
      ? new EgressRecordingRunner(connected.runner, this.options.records, egressToken, connected.egressBound && request.runId)
      : connected.runner;
    const entry = this.registry.add({ sandbox, runner, egressToken }, request.agentType);
    this.registry.claim(entry, { conversationId: request.conversationId, tenantId: request.tenantId });
    // Ended while we connected: the watch's event came before the entry existed.
    const latest = this.options.client.cached(sandbox.metadata.name);
    const latestStanding = latest && latest.metadata.uid === sandbox.metadata.uid ? standingOf(latest) : undefined;
    if (latestStanding?.kind === 'ended') void this.lost(entry, latestStanding);
    return entry;
  }

  async release(lease: Lease, options: ReleaseOptions): Promise<{ heldUntil: Date | null }> {
    const entry = this.registry.get(lease.runner.id);
    if (!entry) return { heldUntil: null };
    if (options.abandon) {
      if (this.registry.remove(entry)) await entry.runner.kill();
      return { heldUntil: null };
    }
    const hold = options.hold;
    if (
      hold &&
      hold.maxConcurrentWarm > 0 &&
      !options.broken &&
      !options.discard &&
      lease.runner.alive &&
      standingOf(entry.sandbox).kind !== 'ended'
    ) {
      const now = this.now();
      const spec = holdSpec(now, hold.idleTtlSeconds, hold.maxConcurrentWarm);
      try {
        if (!(await this.options.client.patchSpec(entry.sandbox, spec))) throw new Error('the Sandbox is gone');
        const heldUntil = Date.parse(spec.shutdownTime);
        this.registry.turnEnded(entry);
        this.registry.hold(entry, heldUntil);
        await this.registry.showWarm(entry, new Date(heldUntil));
        return { heldUntil: new Date(heldUntil) };
      } catch (error) {
        this.options.logger.warn(
          { err: error, sandbox: entry.sandbox.metadata.name },
          'moving a Sandbox shutdownTime failed; it is released instead',
        );
      }
    }
    await this.end(entry, { save: !options.broken && !options.discard });
    return { heldUntil: null };
  }

  /** The conversation is gone: its Sandbox goes, whichever replica held it. */
  async discardConversation(conversationId: string): Promise<void> {
    for (const entry of this.registry.heldFor(conversationId)) await this.end(entry, { save: false });
    const leftover = this.options.client.cachedForConversation(conversationId);
    // A Sandbox busy with a turn on this process is ended with the turn.
    if (leftover && !this.registry.all().some((e) => e.sandbox.metadata.uid === leftover.metadata.uid)) {
      await this.options.client.delete(leftover);
    }
  }

  async expireLapsedHolds(): Promise<void> {
    await Promise.all(this.registry.lapsedHolds().map((entry) => this.end(entry, { save: true })));
  }

  /**
   * Connects to the runner at `address`. The run's egress binding is written meanwhile, rather than on
   * the turn's way out (it must be in place before the turn, whose first request may reach another
   * replica's egress proxy), and cleared again when the connection fails.
   */
  private async connectTo(address: RunnerAddress, runId: string | undefined, takeoverAfter?: number): Promise<Connected> {
    const { records } = this.options;
    const { token, egressToken } = await this.options.client.pods.tokens(address);
    const egressBound = records && runId ? records.bindEgress(address.podName, egressToken, runId) : undefined;
    egressBound?.catch(() => undefined);
    try {
      const runner = await this.options.connect({ id: address.podName, host: address.host, port: address.port, token, takeoverAfter });
      return { runner, egressToken, egressBound };
    } catch (error) {
      if (records && runId && egressBound) {
        // Once the write has settled, so that it cannot land after the clearing.
        await egressBound.catch(() => undefined);
        await records.clearEgress(address.podName, runId).catch(() => undefined);
      }
      throw error;
    }
  }

  /** The conversation's Sandbox: the one in the cluster unless it has ended, else a new one. */
  private async sandboxFor(request: AcquireRequest): Promise<Sandbox> {
    const { client } = this.options;
    let found = client.cachedForConversation(request.conversationId);
    for (let attempt = 0; attempt < MAX_CREATE_ATTEMPTS; attempt++) {
      if (found && standingOf(found).kind === 'ended') {
        await client.delete(found);
        await client.whenGone(found);
        found = undefined;
      }
      found ??= await this.createSandbox(request);
      if (standingOf(found).kind !== 'ended') return found;
    }
    throw new Error(`Sandbox ${sandboxName(request.conversationId)} keeps ending before it is used`);
  }

  /** A new Sandbox for the conversation (or another replica's of that name); the turn's lines name the one this process made. */
  private async createSandbox(request: AcquireRequest): Promise<Sandbox> {
    const { client, logger } = this.options;
    const { sandbox, created } = await client.createOrGet(newSandbox(request, client.namespace, this.now()));
    if (created) {
      logger.info(
        { sandbox: sandbox.metadata.name, conversation_id: request.conversationId, request_id: request.requestId },
        'sandbox created',
      );
    }
    return sandbox;
  }

  /**
   * A leased or held runner's Sandbox ended under it: the turn on it ends `crashed`; a hold ends. A
   * hold the controller expired (idle TTL, warm cap) keeps its workspace first: the pod's preStop
   * hook waits for this process to say goodbye. A failed or deleted Sandbox keeps nothing (its
   * conversation may be gone).
   */
  private async lost(entry: Entry, standing: Extract<SandboxStanding, { kind: 'ended' }>, expired = false): Promise<void> {
    if (!this.registry.has(entry)) return;
    this.options.logger.warn(
      {
        sandbox: entry.sandbox.metadata.name,
        runner_id: entry.runner.id,
        reason: standing.reason,
        message: standing.message,
        state: entry.view.state,
      },
      'a sandbox in use ended',
    );
    if (entry.view.state === 'busy') {
      // The run manager releases it (broken) when the turn has ended.
      await entry.runner.kill();
      return;
    }
    await this.end(entry, { save: expired });
  }

  /**
   * Ends this process's use of a runner: its workspace kept for the conversation (`save`, when the
   * runner still answers), connection closed, Sandbox deleted, conversation shown cold.
   */
  private async end(entry: Entry, options: { save: boolean }): Promise<void> {
    if (this.registry.remove(entry)) await this.dispose(entry, options);
  }

  /** `end` once the entry is no longer registered. */
  private async dispose(entry: Entry, options: { save: boolean }): Promise<void> {
    const { records } = this.options;
    const { conversationId } = entry.view;
    if (options.save && records && conversationId && entry.runner.alive) {
      try {
        await records.saveWorkspace(
          conversationId,
          await entry.runner.exportWorkspace({ maxBytes: WORKSPACE_MAX_BYTES, exclude: WORKSPACE_EXCLUDE }),
        );
      } catch (error) {
        this.options.logger.warn(
          { err: error, conversation_id: conversationId },
          'keeping a workspace failed; the next sandbox starts without it',
        );
      }
    }
    await entry.runner.kill();
    try {
      await this.options.client.delete(entry.sandbox);
    } catch (error) {
      // The controller still expires it at its shutdownTime.
      this.options.logger.warn({ err: error, sandbox: entry.sandbox.metadata.name }, 'deleting a Sandbox failed');
    }
    await this.registry.showCold(entry);
  }
}

/** The Event of an egress refusal: its reason (REASONS), and the destination and why, never a value. */
function refusalEvent(refusal: EgressRefusalReport): { reason: string; message: string } {
  const toward = refusal.destination;
  switch (refusal.outcome) {
    case 'destination-refused':
      return { reason: REASONS.egressDestinationRefused, message: `the egress proxy refused a request to ${toward}: ${refusal.detail}` };
    case 'missing-secret':
      return {
        reason: REASONS.egressSecretMissing,
        message: `a request to ${toward} carried ${placeholderFor(refusal.detail)}, which is vaulted for no scope of the run; the run was ended`,
      };
    case 'secret-destination-denied':
      return {
        reason: REASONS.egressSecretDestinationDenied,
        message: `a request to ${toward} carried ${placeholderFor(refusal.detail)}, whose allowed_hosts do not include it; refused, the run was ended`,
      };
  }
}
