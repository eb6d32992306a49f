/**
 * Expectations of in-flight creates and deletes, keyed by owner: what was asked of the API server
 * but is not yet visible in a (possibly stale) cache. A controller counts them as if already seen,
 * so a reconcile running on a cache that lags its own writes never creates a second pod for the same
 * place. An expectation lapses after `ttlMs` (a create that failed silently must not block forever).
 *
 * Pure: each function returns a new map. The local provider needs none (its runners are in its
 * map the moment they are asked for); the controller holds one map per kind.
 */

export interface Pending {
  /** Names created but not yet observed. */
  creates: readonly string[];
  /** Names deleted but still observed. */
  deletes: readonly string[];
  /** When the last expectation was recorded (ms). */
  since: number;
}

export type Expectations = ReadonlyMap<string, Pending>;

export const NO_EXPECTATIONS: Expectations = new Map();

export function expectCreate(expectations: Expectations, key: string, name: string, now: number): Expectations {
  const pending = current(expectations, key);
  return withPending(expectations, key, { ...pending, creates: [...pending.creates, name], since: now });
}

export function expectDelete(expectations: Expectations, key: string, name: string, now: number): Expectations {
  const pending = current(expectations, key);
  return withPending(expectations, key, { ...pending, deletes: [...pending.deletes, name], since: now });
}

/** The cache showed `name` (created) or stopped showing it (deleted). */
export function observed(expectations: Expectations, key: string, name: string, event: 'created' | 'deleted'): Expectations {
  const pending = expectations.get(key);
  if (!pending) return expectations;
  const next =
    event === 'created'
      ? { ...pending, creates: pending.creates.filter((n) => n !== name) }
      : { ...pending, deletes: pending.deletes.filter((n) => n !== name) };
  return withPending(expectations, key, next);
}

/** A create that failed never shows up: forget it so the next reconcile may try again. */
export function lowerCreate(expectations: Expectations, key: string, name: string): Expectations {
  return observed(expectations, key, name, 'created');
}

/** The names still in flight for `key` at `now` (none once they lapsed). */
export function inFlight(expectations: Expectations, key: string, now: number, ttlMs: number): Pending | undefined {
  const pending = expectations.get(key);
  if (!pending || now - pending.since > ttlMs) return undefined;
  return pending;
}

function current(expectations: Expectations, key: string): Pending {
  return expectations.get(key) ?? { creates: [], deletes: [], since: 0 };
}

function withPending(expectations: Expectations, key: string, pending: Pending): Expectations {
  const next = new Map(expectations);
  if (pending.creates.length === 0 && pending.deletes.length === 0) next.delete(key);
  else next.set(key, pending);
  return next;
}
