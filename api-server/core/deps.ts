import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Vault } from './crypto.js';
import type { Db } from './db/database.js';
import type { IdGenerator } from './ids.js';
import type { Metrics } from './metrics.js';
import type { RateLimiter } from './rate-limit.js';

/**
 * What the shared plumbing (route machinery, middleware, idempotency) needs; the features' own
 * dependencies extend it in `api-server/deps.ts`, so core imports no feature module.
 */
export interface CoreDeps {
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
  /** The lines of a run (an assistant message) after the first `after`, live or stored, until its terminal line. */
  followRun(messageId: string, after: number, signal: AbortSignal): AsyncIterable<object>;
}
