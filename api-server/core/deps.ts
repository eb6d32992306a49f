import type { Logger } from 'pino';
import type { ApprovalGate } from '../approvals/approval-gate.js';
import type { Config } from '../config.js';
import type { RepositorySyncWorker } from '../repositories/sync.js';
import type { RunManager } from '../runs/run-manager.js';
import type { SandboxProvider } from '../sandboxes/provider.js';
import type { Vault } from './crypto.js';
import type { Db } from './db/database.js';
import type { IdGenerator } from './ids.js';
import type { Metrics } from './metrics.js';
import type { RateLimiter } from './rate-limit.js';

/** Everything a route or service needs from the outside world; tests build their own. */
export interface AppDeps {
  db: Db;
  config: Config;
  logger: Logger;
  vault: Vault;
  newId: IdGenerator;
  now: () => Date;
  /** Check every response body against its declared schema (on in tests, off in production). */
  validateResponses: boolean;
  /** Per-principal request budgets, shared by the API nodes. */
  rateLimiter: RateLimiter;
  /** This process's Prometheus registry and the functions features record through. */
  metrics: Metrics;
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
