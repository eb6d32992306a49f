/**
 * Sandbox capacity, warm-hold and idle-TTL policy: pure functions over a snapshot of runners (a
 * node's for the local provider, a cluster's for the Kubernetes controller) and an explicit `now`,
 * so both make the same decisions and both are tested without timers.
 *
 * Every runner counts against the node's capacity (`maxSandboxes`): pre-started pool runners,
 * runners busy with a turn and runners held warm for a conversation. Warm holds are the soft part:
 * when capacity is needed for a turn and none is free, the least recently used held runner on the
 * node is evicted (its conversation resumes cold next time). A turn is refused or queued only when
 * every runner is busy.
 */

import type { RunnerView } from './runner-view.js';

export type { RunnerState, RunnerView } from './runner-view.js';

export interface CapacityLimits {
  maxSandboxes: number;
  poolSize: number;
}

export type AcquireDecision =
  | { kind: 'use-held'; runnerId: string }
  | { kind: 'claim-pooled'; runnerId: string }
  | { kind: 'start-new' }
  | { kind: 'evict-and-start'; evictRunnerId: string }
  | { kind: 'no-capacity' };

export interface AcquireRequest {
  agentType: string;
  conversationId: string;
}

/** Which runner a turn of `request` gets, in order of preference. */
export function decideAcquire(runners: RunnerView[], request: AcquireRequest, limits: CapacityLimits): AcquireDecision {
  const held = runners.find((r) => r.state === 'held' && r.conversationId === request.conversationId);
  if (held) return { kind: 'use-held', runnerId: held.id };
  const pooled = runners.find((r) => r.state === 'pooled' && r.agentType === request.agentType);
  if (pooled) return { kind: 'claim-pooled', runnerId: pooled.id };
  if (runners.length < limits.maxSandboxes) return { kind: 'start-new' };
  // Full: give up capacity that is only waiting, warm holds first (least recently used), then a
  // pre-started runner of another agent type.
  const victim =
    leastRecentlyUsed(runners.filter((r) => r.state === 'held')) ?? leastRecentlyUsed(runners.filter((r) => r.state === 'pooled'));
  if (victim) return { kind: 'evict-and-start', evictRunnerId: victim.id };
  return { kind: 'no-capacity' };
}

export interface HoldRequest {
  runnerId: string;
  tenantId: string;
  idleTtlSeconds: number;
  maxConcurrentWarm: number;
  now: number;
}

export interface HoldDecision {
  /** False when the tenant's cap is 0: the runner is released instead of held. */
  hold: boolean;
  heldUntil: number;
  /** Held runners of the same tenant to release so that the tenant stays within its cap (LRU first). */
  evict: string[];
}

/** After a warm turn: keep the runner under a sliding TTL, within the tenant's `max_concurrent_warm`. */
export function decideHold(runners: RunnerView[], request: HoldRequest): HoldDecision {
  const heldUntil = request.now + request.idleTtlSeconds * 1000;
  if (request.maxConcurrentWarm <= 0) return { hold: false, heldUntil, evict: [] };
  const others = runners.filter((r) => r.state === 'held' && r.tenantId === request.tenantId && r.id !== request.runnerId);
  // The runner being held is the most recently used one, so it keeps one of the cap's places.
  return { hold: true, heldUntil, evict: beyondCap(others, request.maxConcurrentWarm - 1) };
}

/**
 * Held runners to release so that each tenant keeps at most its cap, least recently used first: the
 * controller's view, where holds appear as objects rather than as the end of a turn. `capOf` gives a
 * tenant's `max_concurrent_warm` (undefined: no cap known, nothing released).
 */
export function warmCapReleases(runners: RunnerView[], capOf: (tenantId: string) => number | undefined): string[] {
  const byTenant = new Map<string, RunnerView[]>();
  for (const r of runners) {
    if (r.state !== 'held' || r.tenantId === undefined) continue;
    byTenant.set(r.tenantId, [...(byTenant.get(r.tenantId) ?? []), r]);
  }
  const releases: string[] = [];
  for (const [tenantId, held] of byTenant) {
    const cap = capOf(tenantId);
    if (cap !== undefined) releases.push(...beyondCap(held, cap));
  }
  return releases;
}

/** The ids of the least recently used runners beyond the `keep` most recent ones. */
function beyondCap(runners: RunnerView[], keep: number): string[] {
  const oldestFirst = [...runners].sort((a, b) => a.lastUsedAt - b.lastUsedAt || a.id.localeCompare(b.id));
  const excess = oldestFirst.length - Math.max(0, keep);
  return excess > 0 ? oldestFirst.slice(0, excess).map((r) => r.id) : [];
}

/** Held runners whose idle TTL has lapsed at `now`. */
export function expiredHolds(runners: RunnerView[], now: number): string[] {
  return runners.filter((r) => r.state === 'held' && r.heldUntil !== undefined && r.heldUntil <= now).map((r) => r.id);
}

/** The earliest moment a hold lapses (to arm one timer), or undefined. */
export function nextExpiry(runners: RunnerView[]): number | undefined {
  let next: number | undefined;
  for (const r of runners) {
    if (r.state === 'held' && r.heldUntil !== undefined && (next === undefined || r.heldUntil < next)) next = r.heldUntil;
  }
  return next;
}

/**
 * How many runners of `agentType` to pre-start now: up to the pool size, never past capacity.
 * `inFlight` counts creates already asked for but not yet in `runners` (a controller's stale cache,
 * see expectations.ts); they count both towards the pool and against capacity.
 */
export function poolDeficit(runners: RunnerView[], agentType: string, limits: CapacityLimits, inFlight = 0): number {
  const ready = runners.filter((r) => r.agentType === agentType && (r.state === 'pooled' || r.state === 'starting')).length;
  const free = limits.maxSandboxes - runners.length - inFlight;
  return Math.max(0, Math.min(limits.poolSize - ready - inFlight, free));
}

/** A hint for a queued caller: roughly one typical turn per position ahead, at least one second. */
export function retryHintSeconds(position: number, typicalTurnSeconds: number): number {
  return Math.max(1, Math.ceil(position * typicalTurnSeconds));
}

function leastRecentlyUsed(runners: RunnerView[]): RunnerView | undefined {
  let oldest: RunnerView | undefined;
  for (const r of runners) if (!oldest || r.lastUsedAt < oldest.lastUsedAt) oldest = r;
  return oldest;
}

/** Caps on the sandboxes busy at once (runs in progress); undefined: no cap of that kind. */
export interface BusyCaps {
  tenant: number | undefined;
  user: number | undefined;
}

/** A tenant's own setting wins; null or absent falls back to the deployment default. */
export function effectiveBusyCaps(
  settings: { max_busy_sandboxes?: number | null; max_busy_sandboxes_per_user?: number | null },
  defaults: BusyCaps,
): BusyCaps {
  return { tenant: settings.max_busy_sandboxes ?? defaults.tenant, user: settings.max_busy_sandboxes_per_user ?? defaults.user };
}

/** The cap one more busy sandbox would pass, given those already busy for the tenant and for the user; undefined: it fits. */
export function busyCapReached(busy: { tenant: number; user: number }, caps: BusyCaps): 'tenant' | 'user' | undefined {
  if (caps.tenant !== undefined && busy.tenant >= caps.tenant) return 'tenant';
  if (caps.user !== undefined && busy.user >= caps.user) return 'user';
  return undefined;
}
