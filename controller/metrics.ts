/**
 * The controller's Prometheus metrics, on a registry of its own (two controllers in one process,
 * as in tests, do not collide), and the HTTP endpoint serving /metrics, /healthz and /readyz.
 * Labels carry kinds, phases, launch types and pool names: never a tenant, conversation or token.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface ControllerMetrics {
  registry: Registry;
  reconciles: Counter<'kind' | 'result'>;
  reconcileDuration: Histogram<'kind'>;
  claimLatency: Histogram<'launch'>;
  sandboxes: Gauge<'phase'>;
  poolReplicas: Gauge<'pool' | 'state'>;
  queueDepth: Gauge<'kind'>;
  leader: Gauge;
}

export function createMetrics(collect: {
  sandboxPhases: () => Record<string, number>;
  queueDepths: () => Record<string, number>;
}): ControllerMetrics {
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    reconciles: new Counter({
      name: 'acis_controller_reconciles_total',
      help: 'Reconciles by kind and result (ok, error, conflict).',
      labelNames: ['kind', 'result'],
      registers,
    }),
    reconcileDuration: new Histogram({
      name: 'acis_controller_reconcile_duration_seconds',
      help: 'Time one reconcile takes, API calls included.',
      labelNames: ['kind'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    claimLatency: new Histogram({
      name: 'acis_controller_claim_latency_seconds',
      help: 'From a Sandbox created to Ready, by launch type (pool: adopted from a warm pool; cold: a new pod).',
      labelNames: ['launch'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    sandboxes: new Gauge({
      name: 'acis_controller_sandboxes',
      help: 'Sandboxes by phase, from the cache.',
      labelNames: ['phase'],
      registers,
      collect() {
        this.reset();
        for (const [phase, count] of Object.entries(collect.sandboxPhases())) this.set({ phase }, count);
      },
    }),
    poolReplicas: new Gauge({
      name: 'acis_controller_pool_replicas',
      help: 'Warm pool replicas: desired and ready, per pool.',
      labelNames: ['pool', 'state'],
      registers,
    }),
    queueDepth: new Gauge({
      name: 'acis_controller_queue_depth',
      help: 'Keys waiting in the work queue, per kind.',
      labelNames: ['kind'],
      registers,
      collect() {
        for (const [kind, depth] of Object.entries(collect.queueDepths())) this.set({ kind }, depth);
      },
    }),
    leader: new Gauge({ name: 'acis_controller_leader', help: '1 while this replica holds the leader Lease.', registers }),
  };
}

export interface HealthEndpoint {
  port: number;
  close(): Promise<void>;
}

/** /healthz: the process answers. /readyz: its caches are filled. /metrics: Prometheus text. */
export async function serveHealth(options: {
  host: string;
  port: number;
  registry: Registry;
  ready: () => boolean;
}): Promise<HealthEndpoint> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ready = options.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ok\n' : 'caches not synced\n');
    } else if (path === '/metrics') {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
