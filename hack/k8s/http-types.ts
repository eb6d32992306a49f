/**
 * The shapes the REST surface's parts share: a request as recorded, an injected failure, a served
 * watch, what the handler is given, and a parsed resource path. Types only, so http.ts and the
 * modules it routes to (watches, subresources) do not import each other.
 */
import type { Authenticator } from './authentication.js';
import type { RbacAuthorizer } from './authorization.js';
import type { KubeObjects } from './objects.js';
import type { PodLogProvider } from './pod-report.js';
import type { ResourceType } from './resources.js';

/** A watch being served, which a test can stop or cut. */
export interface ServedWatch {
  resource: string;
  stop(): void;
  abort(): void;
}

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'discovery';

export interface RequestRecord {
  method: string;
  /** The URL path, without the query. */
  path: string;
  query: string;
  verb: Verb;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** Who made it, as authenticated. */
  user?: string;
  /** The answer's status code, once sent. */
  status?: number;
}

/**
 * One injected failure, matched against the next requests; every given field must match. `status`
 * answers with that code (on a watch, 410 arrives as an ERROR event in the stream as the real server
 * sends it); `drop` cuts the connection (a watch is cut right after its initial events). `times`
 * (default 1) is how many requests it fails.
 */
export interface FailureRule {
  verb?: Verb;
  method?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  status?: number;
  message?: string;
  drop?: boolean;
  times?: number;
}

export interface HttpDeps {
  objects: KubeObjects;
  bookmarkIntervalMs: number;
  watches: Set<ServedWatch>;
  requests: RequestRecord[];
  failures: FailureRule[];
  podLogs: { provider?: PodLogProvider };
  authenticator: Authenticator;
  authorizer: RbacAuthorizer;
}

export interface Route {
  type?: ResourceType;
  group: string;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
  watchPath: boolean;
}
