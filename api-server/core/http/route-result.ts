/**
 * What a route handler answers, apart from the route machinery that serves it: idempotency stores
 * and replays these, so they must not depend on the machinery that calls idempotency.
 */
export const NDJSON = 'application/x-ndjson';

export interface RouteResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  contentType?: string | undefined;
  /** Serve the lines of this run (an assistant message) after the first `after` as NDJSON instead of a body. */
  stream?: { messageId: string; after?: number };
}
