/**
 * The chart's Grafana dashboard and PrometheusRule: rendered only when enabled, well-formed, every
 * expression parsed by Prometheus's own PromQL grammar (the Lezer parser the Prometheus UI uses),
 * and every metric an expression names one the API server, the egress proxy or the controller
 * exports. Each alert links its runbook, a section of docs/operations.md.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../api-server/core/metrics.js';
import { createMetrics as createControllerMetrics } from '../../controller/metrics.js';
import { createEgressMetrics } from '../../egress-proxy/egress-metrics.js';
import { ROOT } from '../helpers/acis-process.js';
import { find, lintChart, ofKind, renderChart } from './chart-render.js';

const MONITORING = ['metrics.grafanaDashboard.enabled=true', 'metrics.prometheusRule.enabled=true'];

/** The metric names each exported registry serves, histograms with their series suffixes. */
async function exportedMetricNames(): Promise<Set<string>> {
  const api = new Metrics();
  api.watchRunners({ runnerStates: () => [], queuedRuns: () => 0, local: { poolSize: 1, capacity: 8 } });
  const egress = new Registry();
  createEgressMetrics(egress);
  const controller = createControllerMetrics({ sandboxPhases: () => ({}), queueDepths: () => ({}) });
  const names = new Set<string>();
  for (const registry of [api.registry, egress, controller.registry]) {
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    }
  }
  return names;
}

/** Parses `expr` as PromQL; returns the metric names its selectors name, or throws at a syntax error. */
function metricNamesOf(expr: string): string[] {
  // Grafana replaces its interval variables before the query reaches Prometheus.
  const query = expr.replaceAll('$__rate_interval', '5m');
  const tree = parser.parse(query);
  const names: string[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) throw new Error(`PromQL syntax error at ${node.from} in: ${query}`);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') names.push(query.slice(node.from, node.to));
    },
  });
  return names;
}

describe('charts/acis: dashboard and alerts', () => {
  it('passes helm lint --strict with both enabled', async () => {
    const lint = await lintChart({ set: MONITORING });
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
  });

  it('renders neither by default', async () => {
    const objects = await renderChart();
    expect(ofKind(objects, 'PrometheusRule')).toEqual([]);
    expect(objects.filter((object) => object.metadata.name.endsWith('-grafana-dashboard'))).toEqual([]);
  });

  it('renders the dashboard as a ConfigMap for the sidecar whose every query parses and names exported metrics', async () => {
    const objects = await renderChart({ set: [...MONITORING, 'metrics.grafanaDashboard.namespace=monitoring'] });
    const map = find(objects, 'ConfigMap', 'acis-grafana-dashboard');
    expect(map.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(map.metadata.namespace).toBe('monitoring');
    const dashboard = JSON.parse((map.data as Record<string, string>)['acis.json']!);
    expect(dashboard).toMatchObject({ uid: 'acis-overview', title: 'ACIS' });
    const exported = await exportedMetricNames();
    const queries = (dashboard.panels as Array<{ title: string; targets?: Array<{ expr: string }> }>).flatMap((panel) =>
      (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })),
    );
    expect(queries.length).toBeGreaterThan(15);
    const named = new Set<string>();
    for (const { panel, expr } of queries) {
      const names = metricNamesOf(expr);
      expect(names.length, `${panel}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) {
        expect(exported.has(name), `${panel}: ${name} is not exported`).toBe(true);
        named.add(name);
      }
    }
    // What the dashboard promises to show.
    for (const name of [
      'acis_http_requests_total',
      'acis_run_first_agent_line_seconds_bucket',
      'acis_runs_queued',
      'acis_controller_sandboxes',
      'acis_controller_pool_replicas',
      'acis_egress_denials_total',
      'acis_egress_substitutions_total',
      'acis_repository_syncs_total',
      'acis_rate_limited_total',
    ]) {
      expect(named.has(name), name).toBe(true);
    }
  });

  it('renders the alerts: each parses, names exported metrics, has a severity and a runbook section that exists', async () => {
    const objects = await renderChart({
      set: [...MONITORING, 'metrics.prometheusRule.runbookBaseUrl=https://docs.example.com/operations'],
    });
    const rule = find(objects, 'PrometheusRule', 'acis');
    const rules = (
      rule.spec as {
        groups: Array<{
          rules: Array<{ alert: string; expr: string; labels: Record<string, string>; annotations: Record<string, string> }>;
        }>;
      }
    ).groups.flatMap((group) => group.rules);
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'ACISApi5xxRatio',
      'ACISCapacityExhausted',
      'ACISControllerReconcileErrors',
      'ACISControllerWithoutLeader',
      'ACISEgressDenialsSpike',
      'ACISRepositorySyncFailures',
      'ACISSandboxesFailingToStart',
      'ACISSecretDestinationDenied',
      'ACISWarmPoolBelowDesired',
    ]);
    const exported = await exportedMetricNames();
    const runbooks = await readFile(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
    for (const { alert, expr, labels, annotations } of rules) {
      for (const name of metricNamesOf(expr)) expect(exported.has(name), `${alert}: ${name} is not exported`).toBe(true);
      expect(['warning', 'critical']).toContain(labels.severity);
      expect(annotations.summary, alert).toBeTruthy();
      expect(annotations.runbook_url).toBe(`https://docs.example.com/operations#${alert.toLowerCase()}`);
      expect(runbooks, alert).toContain(`\n### ${alert}\n`);
    }
  });

  it('puts the thresholds from values into the expressions, and refuses ones that are not thresholds', async () => {
    const objects = await renderChart({
      set: [...MONITORING, 'metrics.prometheusRule.api5xxRatio=1', 'metrics.prometheusRule.capacityExhaustedFor=30m'],
    });
    const rules = (
      find(objects, 'PrometheusRule', 'acis').spec as { groups: Array<{ rules: Array<{ alert: string; expr: string; for?: string }> }> }
    ).groups[0]!.rules;
    expect(rules.find((r) => r.alert === 'ACISApi5xxRatio')!.expr).toMatch(/> 1$/);
    expect(rules.find((r) => r.alert === 'ACISCapacityExhausted')!.for).toBe('30m');
    await expect(renderChart({ set: [...MONITORING, 'metrics.prometheusRule.api5xxRatio=2'] })).rejects.toThrow(/api5xxRatio/);
    await expect(renderChart({ set: [...MONITORING, 'metrics.prometheusRule.capacityExhaustedFor=soon'] })).rejects.toThrow(
      /capacityExhaustedFor/,
    );
  });
});
