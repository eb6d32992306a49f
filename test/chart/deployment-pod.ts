/**
 * What a kubelet would give the one container of a Deployment's pod, for tests that run the chart's
 * processes outside the simulated kubelet (the test server runs no Deployment controller): the
 * container as rendered, and its environment with Secret and fieldRef references resolved.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const run = promisify(execFile);

export interface EnvEntry {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string; optional?: boolean } };
}

export interface RenderedContainer {
  command?: string[];
  args: string[];
  env: EnvEntry[];
  ports?: Array<{ name: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}

export interface RenderedPodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    serviceAccountName: string;
    containers: RenderedContainer[];
    volumes?: Array<{ name: string; secret?: { secretName: string; items?: Array<{ key: string; path: string }> } }>;
  };
}

/** The pod template of the Deployment `name` as the install stored it. */
export function podTemplate(server: KubeTestServer, namespace: string, name: string): RenderedPodTemplate {
  const deployment = server.store.get('deployments.apps', namespace, name) as KubeObject & { spec: { template: RenderedPodTemplate } };
  return deployment.spec.template;
}

/**
 * The container's environment as the kubelet computes it for the pod `podName`: literal values,
 * the pod's name and namespace, and Secret keys (an optional key that is absent is left out).
 */
export function containerEnv(
  server: KubeTestServer,
  namespace: string,
  podName: string,
  container: RenderedContainer,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of container.env) {
    const value = resolveEnv(server, namespace, podName, entry);
    if (value !== undefined) env[entry.name] = value;
  }
  return env;
}

function resolveEnv(server: KubeTestServer, namespace: string, podName: string, entry: EnvEntry): string | undefined {
  if (entry.value !== undefined) return entry.value;
  const fieldPath = entry.valueFrom?.fieldRef?.fieldPath;
  if (fieldPath === 'metadata.namespace') return namespace;
  if (fieldPath === 'metadata.name') return podName;
  const secretRef = entry.valueFrom?.secretKeyRef;
  if (secretRef) {
    const secret = server.store.find('secrets', namespace, secretRef.name) as (KubeObject & { data?: Record<string, string> }) | undefined;
    const data = secret?.data?.[secretRef.key];
    if (data === undefined) {
      if (secretRef.optional) return undefined;
      throw new Error(`env ${entry.name}: no key ${secretRef.key} in Secret ${secretRef.name}`);
    }
    return Buffer.from(data, 'base64').toString();
  }
  throw new Error(`cannot resolve env ${entry.name}`);
}

/** A deployment CA as the Secret the docs have the operator make: base64 `ca.crt` and `ca.key`. */
export async function createDeploymentCaFiles(): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acis-chart-ca-'));
  try {
    await run(
      'sh',
      [
        '-c',
        'openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out ca.key && openssl req -x509 -new -key ca.key -days 30 -subj "/CN=test CA" -addext basicConstraints=critical,CA:TRUE -out ca.crt',
      ],
      { cwd: dir },
    );
    const [crt, key] = await Promise.all([readFile(path.join(dir, 'ca.crt')), readFile(path.join(dir, 'ca.key'))]);
    return { 'ca.crt': crt.toString('base64'), 'ca.key': key.toString('base64') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
