import type { ApprovalGate } from './approvals/approval-gate.js';
import type { CoreDeps } from './core/deps.js';
import type { RepositorySyncWorker } from './repositories/sync.js';
import type { RunOutcome, RunRequest, TakenOverRun } from './runs/run-request.js';
import type { RunStream } from './runs/run-stream.js';
import type { SandboxProvider } from './sandboxes/provider.js';
import type { RunSecret } from '../egress-proxy/secret-binding.js';

/** Everything a route or service needs from the outside world; tests build their own. */
export interface AppDeps extends CoreDeps {
  /** Agent runs on this node. */
  runtime: Runtime;
  /** Repository syncs (git fetch, catalog) and the synced content runs use. */
  repositorySync: RepositorySyncWorker;
}

export interface Runtime {
  /** This API server process, as recorded on the runs it hosts. */
  nodeId: string;
  provider: SandboxProvider;
  runs: RunHost;
  /** Where this node's runs wait on their approvals, and how a resolution reaches the node hosting the run. */
  approvals: ApprovalGate;
}

/**
 * What routes and services ask of the runs this node hosts (the RunManager; the process that built it
 * keeps its shutdown to itself). Named here rather than as the class, because the run's own modules
 * reach services that take these deps: naming the class would make the deps import themselves.
 */
export interface RunHost {
  /** False once the node is shutting down: new messages are refused. */
  readonly accepting: boolean;
  /** Starts the run; returns its stream at once and the outcome when it ends. */
  start(request: RunRequest): { stream: RunStream; done: Promise<RunOutcome> };
  /** Carries on a run claimed from a node that died mid-turn; resolves with its outcome. */
  takeOver(run: TakenOverRun): Promise<RunOutcome>;
  liveStream(messageId: string): RunStream | undefined;
  /** A run hosted here as the egress proxy sees it (its secrets, its request id); none once it has ended. */
  liveRun(messageId: string): { secrets: ReadonlyMap<string, RunSecret>; requestId: string } | undefined;
}
