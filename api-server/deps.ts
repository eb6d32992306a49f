import type { ApprovalGate } from './approvals/approval-gate.js';
import type { CoreDeps } from './core/deps.js';
import type { RepositorySyncWorker } from './repositories/sync.js';
import type { RunManager } from './runs/run-manager.js';
import type { SandboxProvider } from './sandboxes/provider.js';

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
  runs: RunManager;
  /** Where this node's runs wait on their approvals, and how a resolution reaches the node hosting the run. */
  approvals: ApprovalGate;
}
