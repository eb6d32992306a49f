import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from './db/database.js';
import type { Principal } from './principal.js';
import { ProblemError } from './problems.js';

/**
 * Fixed-window rate limits per principal (service key or platform-JWT user) and request class,
 * shared by every API node through PostgreSQL.
 *
 * A window starts at a bucket's first request after the previous window ended (database clock, so
 * nodes with skewed clocks agree). Nodes do not ask the database on every request: each reserves a
 * chunk of CHUNK_SHARE of the limit at a time and spends it locally. The limit is never exceeded
 * (a node only spends what it reserved), but a node's unspent reservation is not available to the
 * others, so with N nodes a principal can be refused up to (N-1) chunks early: at most 1% per
 * extra node.
 *
 * Fail-safe direction: open. If the database cannot be reached, requests are let through (and
 * logged), because refusing everything would turn a database hiccup into a total outage of a
 * service that needs the database to answer anyway.
 */
export type RateClass = 'token-exchange' | 'message-send' | 'other';

export interface RateLimitConfig {
  enabled: boolean;
  windowSeconds: number;
  limits: Record<RateClass, number>;
}

export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

const CHUNK_SHARE = 0.01;
/** After a database error, let requests through without asking again for this long. */
const FAIL_OPEN_MS = 5_000;
/** Forget buckets whose window has ended once this many are held. */
const PRUNE_ABOVE = 10_000;

interface LocalBucket {
  /** When this node's view of the window ends, on the local monotonic-ish clock. */
  windowEndsAt: number;
  remaining: number;
  /** The database says the window's limit is reserved in full: refuse until it ends. */
  exhausted: boolean;
}

export interface RateLimiterDeps {
  db: Db;
  logger: Logger;
  config: RateLimitConfig;
  /** Told of every refusal (the metrics' counter). */
  onRefused?: (rateClass: RateClass) => void;
  /** Local clock in milliseconds; only durations are taken from it. */
  nowMs?: () => number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, LocalBucket>();
  private readonly reserving = new Map<string, Promise<void>>();
  private readonly nowMs: () => number;
  private failOpenUntil = 0;

  constructor(private readonly deps: RateLimiterDeps) {
    this.nowMs = deps.nowMs ?? Date.now;
  }

  /** Throws 429 `rate-limited` with Retry-After when `principal` is over its limit for `rateClass`. */
  async enforce(principal: Principal, rateClass: RateClass): Promise<void> {
    const decision = await this.take(principal, rateClass);
    if (decision.allowed) return;
    this.deps.onRefused?.(rateClass);
    throw new ProblemError('rate-limited', 429, {
      detail: `Too many ${describeClass(rateClass)} for this credential; retry after ${decision.retryAfterSeconds} s.`,
      headers: { 'Retry-After': String(decision.retryAfterSeconds) },
    });
  }

  async take(principal: Principal, rateClass: RateClass): Promise<RateDecision> {
    const owner = bucketOwner(principal);
    if (!this.deps.config.enabled || owner === undefined) return { allowed: true };
    const bucket = `${rateClass}|${owner}`;
    const limit = this.deps.config.limits[rateClass];
    for (;;) {
      if (this.nowMs() < this.failOpenUntil) return { allowed: true };
      const local = this.buckets.get(bucket);
      const now = this.nowMs();
      if (local && now < local.windowEndsAt) {
        if (local.remaining > 0) {
          local.remaining -= 1;
          return { allowed: true };
        }
        if (local.exhausted) return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((local.windowEndsAt - now) / 1000)) };
      }
      // One reservation per bucket at a time: a burst on this node waits for it instead of each
      // request reserving its own chunk (which would strand tokens here).
      const inFlight = this.reserving.get(bucket);
      if (inFlight) {
        await inFlight;
        continue;
      }
      const reservation = this.reserve(bucket, limit).finally(() => this.reserving.delete(bucket));
      this.reserving.set(bucket, reservation);
      await reservation;
    }
  }

  private async reserve(bucket: string, limit: number): Promise<void> {
    const chunk = Math.max(1, Math.floor(limit * CHUNK_SHARE));
    const windowSeconds = this.deps.config.windowSeconds;
    let row: { window_ends_in_ms: number; used: number };
    try {
      const result = await sql<{ window_ends_in_ms: number; used: number }>`
        insert into rate_limit_windows as w (bucket, window_started_at, used)
        values (${bucket}, now(), ${chunk})
        on conflict (bucket) do update set
          window_started_at = case when w.window_started_at <= now() - make_interval(secs => ${windowSeconds}) then now() else w.window_started_at end,
          used = case when w.window_started_at <= now() - make_interval(secs => ${windowSeconds}) then ${chunk} else w.used + ${chunk} end
        returning used,
          (extract(epoch from (window_started_at + make_interval(secs => ${windowSeconds}) - now())) * 1000)::float8 as window_ends_in_ms
      `.execute(this.deps.db);
      row = result.rows[0]!;
    } catch (err) {
      this.failOpenUntil = this.nowMs() + FAIL_OPEN_MS;
      this.deps.logger.warn({ err }, 'rate limits cannot reach the database; requests are let through unlimited for a few seconds');
      return;
    }
    const before = row.used - chunk;
    const granted = Math.max(0, Math.min(chunk, limit - before));
    const windowEndsAt = this.nowMs() + row.window_ends_in_ms;
    const local = this.buckets.get(bucket);
    // Tokens left from an earlier window are void; those of this window add up.
    const carried = local && this.nowMs() < local.windowEndsAt ? local.remaining : 0;
    if (this.buckets.size > PRUNE_ABOVE) this.prune();
    this.buckets.set(bucket, { windowEndsAt, remaining: carried + granted, exhausted: granted === 0 });
  }

  private prune(): void {
    const now = this.nowMs();
    for (const [bucket, local] of this.buckets) if (local.windowEndsAt <= now) this.buckets.delete(bucket);
  }
}

/** Each service key and each user has its own budget; the operator's admin token has none. */
function bucketOwner(principal: Principal): string | undefined {
  switch (principal.kind) {
    case 'service':
      return `key:${principal.serviceKeyId}`;
    case 'user':
      return `user:${principal.userId}`;
    case 'admin':
      return undefined;
    // A webhook caller is nobody until its signature verifies; flood control for it belongs to the ingress.
    case 'webhook':
      return undefined;
  }
}

function describeClass(rateClass: RateClass): string {
  switch (rateClass) {
    case 'token-exchange':
      return 'token exchanges';
    case 'message-send':
      return 'messages';
    case 'other':
      return 'requests';
  }
}
