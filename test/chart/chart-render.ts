/**
 * The chart as helm renders it: `helm lint --strict` and `helm template` with the real helm 4.1 of
 * test/helpers/kube-tools.ts, parsed into objects, with lookups the tests share.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../helpers/acis-process.js';
import { helm, type ToolResult } from '../helpers/kube-tools.js';

export const CHART = path.join(ROOT, 'charts', 'acis');
export const PRODUCTION_VALUES = path.join(CHART, 'ci', 'production-values.yaml');
export const TRIAL_VALUES = path.join(CHART, 'ci', 'trial-values.yaml');
export const EGRESS_IN_API_VALUES = path.join(CHART, 'ci', 'egress-in-api-server-values.yaml');
/** What hack/kind-up.sh installs with. */
export const KIND_VALUES = path.join(ROOT, 'hack', 'kind', 'values.yaml');
export const NAMESPACE = 'acis';
/** Where the chart puts runner pods and sync Jobs by default (values.yaml, sandboxNamespace). */
export const SANDBOX_NAMESPACE = 'acis-sandboxes';

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** helm without a cluster: a throwaway home for its caches, no kubeconfig needed. */
export async function offlineHelm(args: string[]): Promise<ToolResult> {
  const home = await mkdtemp(path.join(tmpdir(), 'acis-helm-'));
  try {
    return await helm(args, { kubeconfig: path.join(home, 'kubeconfig'), timeoutMs: 60_000 });
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}

export interface RenderOptions {
  valuesFiles?: string[];
  set?: string[];
}

function valueArgs(options: RenderOptions): string[] {
  return [...(options.valuesFiles ?? []).flatMap((file) => ['--values', file]), ...(options.set ?? []).flatMap((pair) => ['--set', pair])];
}

export async function templateChart(options: RenderOptions = {}): Promise<ToolResult> {
  return offlineHelm(['template', 'acis', CHART, '--namespace', NAMESPACE, ...valueArgs(options)]);
}

/** The objects `helm template` renders; throws with helm's message when it refuses. */
export async function renderChart(options: RenderOptions = {}): Promise<RenderedObject[]> {
  const result = await templateChart(options);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((document) => document.toJS() as RenderedObject | null)
    .filter((object): object is RenderedObject => object !== null);
}

export function lintChart(options: RenderOptions = {}): Promise<ToolResult> {
  return offlineHelm(['lint', '--strict', CHART, ...valueArgs(options)]);
}

export function find(objects: RenderedObject[], kind: string, name: string): RenderedObject {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}

export function ofKind(objects: RenderedObject[], kind: string): RenderedObject[] {
  return objects.filter((object) => object.kind === kind);
}
