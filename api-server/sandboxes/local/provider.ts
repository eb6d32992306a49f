import { existsSync, mkdirSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { type Bridge, serveUnixToTcp } from '../../../runner/bridge.js';
import { localRunnerProcess } from './runner-process.js';
import type { Config } from '../../config.js';
import { directorySize, watchDirectorySize } from './workspace-size.js';
import { type LimitEnforcement, probeLimitEnforcement } from './resource-limits.js';
import { randomToken } from '../../core/crypto.js';
import { LocalRunner } from './runner.js';
import { serveModelGateway } from './model-gateway.js';
import { type CapacityLimits, decideAcquire, decideHold, poolDeficit, type RunnerView } from '../../../sandbox-policy/policy.js';
import { AGENT_TYPES } from '../agent-types.js';
import {
  type AcquireRequest,
  type Admission,
  admission,
  type EgressCredentials,
  type EgressEndpoint,
  type Lease,
  type MissingSecretAbort,
  type ReleaseOptions,
  type SandboxProvider,
  type SandboxStateListener,
  SandboxUnavailable,
  type WaitOptions,
} from '../provider.js';
import { type RegisteredRunner, RunnerRegistry } from '../runner-registry.js';
import { checkSandboxRuntime, type SandboxRuntime } from './sandbox-runtime.js';
import { WaitingLine } from './waiting-line.js';

/** The package root (holding node_modules and the runner's source), from source or from dist/ alike. */
const APP_ROOT = packageRoot(path.dirname(fileURLToPath(import.meta.url)));
/** Running compiled (`npm start`): runners start from the compiled runner beside this build, not through tsx. */
const COMPILED_RUNNER = import.meta.url.endsWith('.js') && existsSync(path.join(APP_ROOT, 'dist', 'runner', 'runner.js'));

function packageRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}
/** Where the host's TLS roots are (Debian family), to bundle with the egress CA. */
const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

interface RunnerEntry extends RegisteredRunner {
  readonly runner: LocalRunner;
  readonly dirs: { root: string; workspace: string; home: string };
}

/**
 * The `local` sandbox provider: runner processes on this node, each in its own bubblewrap sandbox
 * with a private workspace and HOME, reaching the model endpoint only through a Unix socket bridge.
 * Capacity, pooling, warm holds and their expiry follow the pure policy in sandbox-policy/, and every
 * change of a runner's state goes through its transitions (kept by the runner registry).
 */
export class LocalSandboxProvider implements SandboxProvider {
  private readonly registry: RunnerRegistry<RunnerEntry>;
  private readonly line = new WaitingLine();
  private modelBridge: Bridge | undefined;
  private egressBridge: Bridge | undefined;
  private egress: EgressEndpoint | undefined;
  /** Unsandboxed runners (ACIS_SANDBOX_ISOLATION=none) need no runtime. */
  private runtime: SandboxRuntime = { ok: true, bwrapPath: '' };
  private limitEnforcement: LimitEnforcement = { enforced: false, reason: 'not probed yet' };
  private stopped = false;
  private readonly limits: CapacityLimits;
  private readonly root: string;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    onSandboxState: SandboxStateListener,
    private readonly now: () => number = Date.now,
  ) {
    this.limits = { maxSandboxes: config.maxSandboxes, poolSize: config.poolSize };
    this.root = path.join(config.dataDir, 'sandboxes');
    this.registry = new RunnerRegistry({ logger, onSandboxState, onHoldsLapsed: () => this.expireLapsedHolds(), now });
  }

  /**
   * Prepares the run directory every sandbox sees at /run/acis: `model.sock` (the model gateway),
   * `egress.sock` (piped to the egress proxy) and the CA files runners trust. Without `egress`, runners
   * have no route out at all. First checks that runners can start here at all (`unavailableReason`).
   */
  async start(egress?: EgressEndpoint): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
    const runDir = path.join(this.root, 'run');
    await mkdir(runDir, { recursive: true });
    if (this.config.sandboxIsolation === 'bwrap') {
      this.runtime = await checkSandboxRuntime(this.config.bwrapPath, path.join(this.root, 'probe'));
      if (!this.runtime.ok) {
        this.logger.error(
          { reason: this.runtime.reason },
          'agent runners cannot start on this machine: every message fails until this is fixed and the server restarted',
        );
      }
    }
    await this.probeRunnerLimits();
    this.modelBridge = await serveModelGateway(path.join(runDir, 'model.sock'), {
      baseUrl: this.config.anthropicBaseUrl,
      apiKey: this.config.anthropicApiKey,
      // The platform's key serves a run, not a runner: an idle runner's leftover process gets none.
      authorize: (credential) => {
        const [runnerId = '', token = ''] = credential.split(':');
        if (!this.registry.servingWith(runnerId, token)) return undefined;
        return { runnerId, requestId: this.registry.get(runnerId)?.runner.currentRequestId };
      },
      logger: this.logger.child({ component: 'model-gateway' }),
    });
    if (egress) {
      this.egress = egress;
      this.egressBridge = await serveUnixToTcp(path.join(runDir, 'egress.sock'), { host: '127.0.0.1', port: egress.port });
      const systemRoots = await readFile(SYSTEM_CA_BUNDLE, 'utf8').catch(() => '');
      await writeFile(path.join(runDir, 'egress-ca.pem'), egress.caCertificatePem);
      await writeFile(path.join(runDir, 'ca-bundle.pem'), `${systemRoots.trimEnd()}\n${egress.caCertificatePem}`);
    }
    this.topUpPool();
  }

  /** Finds out whether runners' CPU and memory can be bounded here, and says so either way. */
  private async probeRunnerLimits(): Promise<void> {
    const limits = this.config.runnerLimits;
    this.limitEnforcement = await probeLimitEnforcement(limits);
    const fields = { cpus: limits.cpus, memory_bytes: limits.memoryBytes };
    if (this.limitEnforcement.enforced) this.logger.info(fields, 'runner CPU and memory limited through a systemd scope each');
    else
      this.logger.warn(
        { ...fields, reason: this.limitEnforcement.reason },
        'runner CPU and memory are NOT limited on this machine (ACIS_RUNNER_CPUS, ACIS_RUNNER_MEMORY_MB need cgroups v2 through systemd)',
      );
  }

  /** Its runners are this process's alone: so are their credentials and their runs. */
  egressCredentials(abort: MissingSecretAbort): EgressCredentials {
    return {
      egressRun: (runnerId, token) => this.registry.egressRun(runnerId, token),
      abortMissing: async (runnerId, alias, destination) => {
        const runId = this.registry.currentRun(runnerId);
        if (runId) abort.here(runId, alias, destination);
      },
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.line.rejectAll(new Error('server is stopping'));
    const entries = this.registry.stop();
    await Promise.all(
      entries.map(async (entry) => {
        await entry.runner.kill();
        // Its warm hold ends with this process; the next message will cold-start and resume.
        await this.registry.showCold(entry);
      }),
    );
    await this.modelBridge?.close();
    await this.egressBridge?.close();
  }

  /** Why runners cannot start on this node (every message then fails with it), or undefined when they can. */
  get unavailableReason(): string | undefined {
    return this.runtime.ok ? undefined : this.runtime.reason;
  }

  /** A snapshot for the policy (and for metrics). */
  views(): RunnerView[] {
    return this.registry.views();
  }

  /** Turns waiting for a runner (`on_capacity=hold`). */
  queuedRuns(): number {
    return this.line.length;
  }

  async acquire(request: AcquireRequest, options: WaitOptions): Promise<Lease> {
    return (await this.admit(request, options)).lease;
  }

  /** Admitted by this node's own decision; a claimed runner's workspace is restored while the caller goes on. */
  async admit(request: AcquireRequest, options: WaitOptions): Promise<Admission> {
    if (!this.runtime.ok) throw new SandboxUnavailable(this.runtime.reason);
    // A hold whose TTL lapsed is not the conversation's any more, even if its timer has not fired yet.
    await this.expireLapsedHolds();
    const immediate = this.tryAcquire(request);
    if (immediate) return admission(immediate);
    if (!options.wait || this.stopped) throw this.line.refusal();
    return admission(Promise.resolve(await this.line.join(request, options)));
  }

  /** Recycles the warm holds whose idle TTL has lapsed (their conversations show cold), then serves the queue. */
  async expireLapsedHolds(): Promise<void> {
    const lapsed = this.registry.lapsedHolds();
    if (lapsed.length === 0) return;
    await Promise.all(lapsed.map((entry) => this.recycle(entry.runner.id)));
    this.pump();
  }

  /** Ends a turn's use of a runner: hold it warm for its conversation, or recycle it. */
  async release(lease: Lease, options: ReleaseOptions): Promise<{ heldUntil: Date | null }> {
    const entry = this.registry.get(lease.runner.id);
    if (!entry) return { heldUntil: null };
    const conversationId = entry.view.conversationId;
    const tenantId = entry.view.tenantId;
    if (entry.view.state === 'busy') this.registry.turnEnded(entry);
    let heldUntil: Date | null = null;
    if (options.hold && !options.broken && lease.runner.alive && tenantId) {
      const decision = decideHold(this.views(), {
        runnerId: entry.runner.id,
        tenantId,
        idleTtlSeconds: options.hold.idleTtlSeconds,
        maxConcurrentWarm: options.hold.maxConcurrentWarm,
        now: this.now(),
      });
      for (const id of decision.evict) await this.recycle(id);
      if (decision.hold) {
        this.registry.hold(entry, decision.heldUntil);
        heldUntil = new Date(decision.heldUntil);
      }
    }
    if (!heldUntil) await this.recycle(entry.runner.id, { save: !options.discard });
    else if (conversationId) await this.registry.showWarm(entry, heldUntil);
    // A claimed runner whose turn ended before its agent spoke has not started its replacement yet.
    this.topUpPool();
    this.pump();
    return { heldUntil };
  }

  /**
   * Forgets a deleted conversation: its warm runner, if it holds one, is recycled without saving,
   * and its saved workspace removed. (A runner busy with its turn is discarded when the turn ends.)
   */
  async discardConversation(conversationId: string): Promise<void> {
    for (const entry of this.registry.heldFor(conversationId)) await this.recycle(entry.runner.id, { save: false });
    await rm(path.dirname(this.conversationWorkspace(conversationId)), { recursive: true, force: true });
    this.pump();
  }

  private tryAcquire(request: AcquireRequest): Promise<Lease> | undefined {
    if (this.stopped) return undefined;
    const decision = decideAcquire(this.views(), request, this.limits);
    switch (decision.kind) {
      case 'use-held': {
        const entry = this.registry.get(decision.runnerId)!;
        this.registry.resume(entry);
        return Promise.resolve(this.lease(entry, true));
      }
      case 'claim-pooled': {
        const entry = this.registry.get(decision.runnerId)!;
        this.bind(entry, request);
        // The replacement starts once the claimed runner's agent has spoken (or the runner is gone):
        // its start-up would otherwise share the CPUs with the claimed turn up to its first line.
        // Not in the same tick: spawning blocks this thread for milliseconds, and the first line is
        // still on its way to the client's stream (its writes are queued behind this callback).
        void entry.runner.spoke.then(() => setImmediate(() => this.topUpPool()));
        return this.prepare(entry, request);
      }
      case 'start-new': {
        const entry = this.spawnRunner(request.agentType, { pooled: false });
        this.bind(entry, request);
        return this.prepare(entry, request);
      }
      case 'evict-and-start': {
        const entry = this.spawnRunner(request.agentType, { pooled: false });
        this.bind(entry, request);
        return this.recycle(decision.evictRunnerId).then(() => this.prepare(entry, request));
      }
      case 'no-capacity':
        return undefined;
    }
  }

  private bind(entry: RunnerEntry, request: AcquireRequest): void {
    this.registry.claim(entry, { conversationId: request.conversationId, tenantId: request.tenantId });
  }

  /** Copies the conversation's saved workspace into the runner's, then waits for the runner to be up. */
  private async prepare(entry: RunnerEntry, request: AcquireRequest): Promise<Lease> {
    try {
      // A conversation's first turn has no saved workspace: one directory read instead of a copy.
      const saved = this.conversationWorkspace(request.conversationId);
      const entries = await readdir(saved).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return [];
        throw error;
      });
      if (entries.length > 0) await cp(saved, entry.dirs.workspace, { recursive: true, force: true });
      await entry.runner.ready;
      return this.lease(entry, false);
    } catch (error) {
      await this.recycle(entry.runner.id);
      this.pump();
      throw error;
    }
  }

  private lease(entry: RunnerEntry, continuing: boolean): Lease {
    const limit = this.config.workspaceMaxBytes;
    return {
      runner: entry.runner,
      continuing,
      watchLimits: (onExceeded) =>
        watchDirectorySize(entry.dirs.root, limit, (bytes) =>
          onExceeded(`The sandbox's workspace and HOME hold ${bytes} bytes, past this deployment's limit of ${limit} bytes.`),
        ),
    };
  }

  private conversationWorkspace(conversationId: string): string {
    return path.join(this.config.dataDir, 'conversations', conversationId, 'workspace');
  }

  /** Starts a runner: `pooled` ones join the pool when ready, the others are claimed by the caller at once. */
  private spawnRunner(agentType: string, options: { pooled: boolean }): RunnerEntry {
    const id = `run_${randomToken(12)}`;
    const dirs = {
      root: path.join(this.root, id),
      workspace: path.join(this.root, id, 'workspace'),
      home: path.join(this.root, id, 'home'),
    };
    // Bind sources must exist before bubblewrap starts.
    mkdirSync(dirs.workspace, { recursive: true });
    mkdirSync(dirs.home, { recursive: true });
    const egressToken = randomToken(24);
    const command = localRunnerProcess({
      appRoot: APP_ROOT,
      compiled: COMPILED_RUNNER,
      isolation: this.config.sandboxIsolation,
      bwrapPath: this.runtime.ok ? this.runtime.bwrapPath : this.config.bwrapPath,
      dirs,
      runDir: path.join(this.root, 'run'),
      credential: { id, token: egressToken },
      egress: this.egress && { hostPort: this.egress.port },
      // A pool runner serves a conversation not known yet; the agent runtime can start before it is.
      prewarm: options.pooled && this.config.poolPrewarm,
    });
    const bounded = this.limitEnforcement.enforced ? { ...command, ...this.limitEnforcement.wrap(command) } : command;
    const runner = new LocalRunner(id, bounded, this.logger, this.config.runnerBounds);
    const entry = this.registry.add({ runner, dirs, egressToken }, agentType);
    void runner.exit.then(() => {
      // A runner that died on its own (crash, OOM) frees its capacity; a turn on it has already ended.
      if (this.registry.has(entry) && entry.view.state !== 'busy') void this.recycle(id).then(() => this.pump());
    });
    if (options.pooled) {
      runner.ready.then(
        () => {
          if (entry.view.state === 'starting') this.registry.ready(entry);
          this.pump();
        },
        (error: unknown) => {
          // Stopping kills the runners still starting: that is no failure to report.
          if (this.stopped) return;
          this.logger.error({ err: error, runner_id: id }, 'pre-starting a runner failed');
          void this.recycle(id);
        },
      );
    }
    return entry;
  }

  /** Saves a runner's workspace back to its conversation (unless told not to), kills it and frees its capacity. */
  private async recycle(runnerId: string, options: { save: boolean } = { save: true }): Promise<void> {
    const entry = this.registry.get(runnerId);
    if (!entry || !this.registry.remove(entry)) return;
    const { conversationId } = entry.view;
    await entry.runner.kill();
    try {
      if (conversationId && options.save) await this.saveWorkspace(entry, conversationId);
    } catch (error) {
      this.logger.warn({ err: error, runner_id: runnerId }, 'saving a runner workspace failed');
    }
    await rm(entry.dirs.root, { recursive: true, force: true });
    // Not only lapsed or evicted holds: a warm runner that served a turn after the conversation
    // switched to pooled, or that crashed, is recycled while busy.
    await this.registry.showCold(entry);
    this.topUpPool();
  }

  /** A workspace past the size limit is not kept: the conversation keeps the one it had. */
  private async saveWorkspace(entry: RunnerEntry, conversationId: string): Promise<void> {
    const limit = this.config.workspaceMaxBytes;
    if ((await directorySize(entry.dirs.workspace, limit)) > limit) {
      this.logger.warn({ runner_id: entry.runner.id, limit_bytes: limit }, 'a runner workspace over ACIS_WORKSPACE_MAX_MB was not saved');
      return;
    }
    await cp(entry.dirs.workspace, this.conversationWorkspace(conversationId), { recursive: true, force: true });
  }

  private topUpPool(): void {
    if (this.stopped || !this.runtime.ok) return;
    for (const agentType of AGENT_TYPES) {
      for (let i = poolDeficit(this.views(), agentType, this.limits); i > 0; i--) this.spawnRunner(agentType, { pooled: true });
    }
  }

  /** Serves queued turns in FIFO order while capacity allows. */
  private pump(): void {
    this.line.serve((request) => this.tryAcquire(request));
  }
}
