import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { RunManager } from '../runs/run-manager.js';
import type { LocalSandboxProvider } from '../sandboxes/local-provider.js';
import type { Vault } from './crypto.js';
import type { Db } from './db/database.js';
import type { IdGenerator } from './ids.js';

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
  /** Agent runs on this node. */
  runtime: Runtime;
}

export interface Runtime {
  /** This API server process, as recorded on the runs it hosts. */
  nodeId: string;
  provider: LocalSandboxProvider;
  runs: RunManager;
}
