import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ProblemKind } from './problems.js';
import type { RateClass } from './rate-limit.js';

/**
 * Every Prometheus metric of an API server process, on a registry of its own (several servers may
 * share one Node process in tests). Features record through the small methods below and never touch
 * prom-client themselves.
 *
 * Labels take values from closed sets only: route templates (never paths), HTTP methods, status
 * codes, problem slugs, runner states, outcome names. No id, external id, token or secret ever
 * becomes a label value, so no scrape can leak one and the series count stays bounded.
 */
export type RunStatus = 'completed' | 'failed';
export type HoldOutcome = 'served' | 'timed-out';
export type ApprovalOutcome = 'approved' | 'denied' | 'expired';
export type SyncOutcome = 'ready' | 'error' | 'superseded';

/** What the runner gauges read at scrape time. */
export interface RunnerSource {
  /** The state of every runner this node has (`starting`, `pooled`, `busy`, `held`, ...). */
  runnerStates(): string[];
  /** Turns waiting for a runner (`on_capacity=hold`). */
  queuedRuns(): number;
  /**
   * Runners per agent type kept started ahead of demand, and this node's runner capacity: the local
   * provider's settings. Absent (kubernetes provider), their series are not served: the cluster's pool
   * and cap are the controller's (`acis_controller_pool_replicas`, `acis_controller_sandboxes`).
   */
  local?: { poolSize: number; capacity: number };
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Seconds; API answers are milliseconds, agent turns up to minutes. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const RUN_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

export class Metrics {
  /** Node's default metrics first, then ours, in the order declared here (the order a scrape lists them). */
  readonly registry = registryWithDefaultMetrics();
  private readonly registers = [this.registry];
  private readonly httpRequests: Counter<'method' | 'route' | 'status'> = new Counter({
    name: 'acis_http_requests_total',
    help: 'API requests answered, by route template, method and status.',
    labelNames: ['method', 'route', 'status'],
    registers: this.registers,
  });
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'> = new Histogram({
    name: 'acis_http_request_duration_seconds',
    help: 'Time from a request arriving to its response starting (a stream counts until its headers go out).',
    labelNames: ['method', 'route', 'status'],
    buckets: HTTP_BUCKETS,
    registers: this.registers,
  });
  private readonly rateLimited: Counter<'class'> = new Counter({
    name: 'acis_rate_limited_total',
    help: 'Requests refused with 429 rate-limited, by rate class.',
    labelNames: ['class'],
    registers: this.registers,
  });
  private readonly runs: Counter<'status' | 'problem'> = new Counter({
    name: 'acis_runs_total',
    help: 'Agent runs ended on this node, by message status and the platform problem that failed it (none: not a platform failure).',
    labelNames: ['status', 'problem'],
    registers: this.registers,
  });
  private readonly runDuration: Histogram<'status'> = new Histogram({
    name: 'acis_run_duration_seconds',
    help: 'Time from a run starting (message accepted) to its end, waiting for a runner and approvals included.',
    labelNames: ['status'],
    buckets: RUN_BUCKETS,
    registers: this.registers,
  });
  private readonly firstAgentLine: Histogram = new Histogram({
    name: 'acis_run_first_agent_line_seconds',
    help: 'Time from a run starting to the first line from the agent.',
    buckets: RUN_BUCKETS,
    registers: this.registers,
  });
  private readonly turnDuration: Histogram<'status'> = new Histogram({
    name: 'acis_turn_duration_seconds',
    help: 'Time an agent turn held its runner, by how it ended (completed, failed, crashed, aborted).',
    labelNames: ['status'],
    buckets: RUN_BUCKETS,
    registers: this.registers,
  });
  private readonly capacityRejections: Counter<'on_capacity'> = new Counter({
    name: 'acis_capacity_rejections_total',
    help: 'Runs refused capacity-exhausted: at once (reject) or after the maximum hold (hold).',
    labelNames: ['on_capacity'],
    registers: this.registers,
  });
  private readonly holdDuration: Histogram<'outcome'> = new Histogram({
    name: 'acis_run_hold_seconds',
    help: 'Time a held run waited in the queue for a runner, by whether it got one.',
    labelNames: ['outcome'],
    buckets: RUN_BUCKETS,
    registers: this.registers,
  });
  private readonly approvalsRequested: Counter = new Counter({
    name: 'acis_approvals_requested_total',
    help: 'Approvals raised by runs on this node.',
    registers: this.registers,
  });
  private readonly approvalsResolved: Counter<'outcome'> = new Counter({
    name: 'acis_approvals_resolved_total',
    help: 'Approvals that ended, by outcome (approved, denied, expired).',
    labelNames: ['outcome'],
    registers: this.registers,
  });
  private readonly syncs: Counter<'outcome'> = new Counter({
    name: 'acis_repository_syncs_total',
    help: 'Repository syncs ended on this node, by outcome (ready, error, superseded by a newer change).',
    labelNames: ['outcome'],
    registers: this.registers,
  });
  private readonly syncDuration: Histogram<'outcome'> = new Histogram({
    name: 'acis_repository_sync_duration_seconds',
    help: 'Time a repository sync took, by outcome.',
    labelNames: ['outcome'],
    buckets: RUN_BUCKETS,
    registers: this.registers,
  });
  private runnerSource: RunnerSource | undefined;

  constructor() {
    const registers = this.registers;
    const runners = () => this.runnerSource;
    new Gauge({
      name: 'acis_runners',
      help: 'Runner processes of this node, by state.',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const state of runners()?.runnerStates() ?? []) counts.set(state, (counts.get(state) ?? 0) + 1);
        for (const [state, count] of counts) this.set({ state }, count);
      },
    });
    new Gauge({
      name: 'acis_runs_queued',
      help: 'Runs waiting for a runner on this node (on_capacity=hold).',
      registers,
      collect() {
        this.set(runners()?.queuedRuns() ?? 0);
      },
    });
  }

  /** The runner gauges read `source` at every scrape. */
  watchRunners(source: RunnerSource): void {
    this.runnerSource = source;
    const { local } = source;
    if (!local) return;
    const registers = [this.registry];
    new Gauge({
      name: 'acis_runner_pool_size',
      help: 'Runners per agent type this node keeps started ahead of demand (ACIS_POOL_SIZE).',
      registers,
    }).set(local.poolSize);
    new Gauge({ name: 'acis_runner_capacity', help: 'Runners this node may run at once (ACIS_MAX_SANDBOXES).', registers }).set(
      local.capacity,
    );
  }

  /** `route` is the matched route template, or `unmatched`. */
  httpRequest(method: string, route: string, status: number, seconds: number): void {
    const labels = { method: HTTP_METHODS.has(method) ? method : 'other', route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  rateLimitRefused(rateClass: RateClass): void {
    this.rateLimited.inc({ class: rateClass });
  }

  runEnded(status: RunStatus, problem: ProblemKind | undefined, seconds: number): void {
    this.runs.inc({ status, problem: problem ?? 'none' });
    this.runDuration.observe({ status }, seconds);
  }

  firstAgentLineAfter(seconds: number): void {
    this.firstAgentLine.observe(seconds);
  }

  turnEnded(status: 'completed' | 'failed' | 'crashed' | 'aborted', seconds: number): void {
    this.turnDuration.observe({ status }, seconds);
  }

  capacityRejected(onCapacity: 'reject' | 'hold'): void {
    this.capacityRejections.inc({ on_capacity: onCapacity });
  }

  holdEnded(outcome: HoldOutcome, seconds: number): void {
    this.holdDuration.observe({ outcome }, seconds);
  }

  approvalRequested(): void {
    this.approvalsRequested.inc();
  }

  approvalResolved(outcome: ApprovalOutcome, count = 1): void {
    this.approvalsResolved.inc({ outcome }, count);
  }

  syncEnded(outcome: SyncOutcome, seconds: number): void {
    this.syncs.inc({ outcome });
    this.syncDuration.observe({ outcome }, seconds);
  }
}

function registryWithDefaultMetrics(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'acis_' });
  return registry;
}

/** Seconds since a `performance.now()` reading. */
export function secondsSince(startedMs: number): number {
  return (performance.now() - startedMs) / 1000;
}
