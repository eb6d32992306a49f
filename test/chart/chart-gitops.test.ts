/**
 * The chart's master key and admin token under a render without a cluster (helm template, as Argo CD
 * renders; `lookup` answers nothing there) and under helm install/upgrade against the Kubernetes API
 * test server: a render without a cluster generates neither (a key invented there would replace the
 * stored one on every sync and make every vaulted secret unreadable), and an install generates them
 * once and keeps them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { helm } from '../helpers/kube-tools.js';
import { CHART, find, NAMESPACE, ofKind, type RenderedObject, renderChart, templateChart } from './chart-render.js';

type Secret = KubeObject & { data: Record<string, string> };
interface EnvEntry {
  name: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

const KEY_NAMES = ['ACIS_MASTER_KEY', 'ACIS_ADMIN_TOKEN'];
const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');
const ADMIN_TOKEN = 'admin-token-0123456789abcdef';

const apiEnv = (objects: RenderedObject[]) =>
  new Map(
    (
      find(objects, 'Deployment', 'acis-api').spec as { template: { spec: { containers: Array<{ env: EnvEntry[] }> } } }
    ).template.spec.containers[0]!.env.map((entry) => [entry.name, entry]),
  );
const keyHolders = (objects: RenderedObject[]) =>
  ofKind(objects, 'Secret').filter((secret) => KEY_NAMES.some((key) => key in ((secret as { data?: object }).data ?? {})));

describe('charts/acis: a render without a cluster (helm template, Argo CD)', () => {
  it('generates no master key or admin token: no Secret holds one, and the pods wait for `<fullname>-secrets`', async () => {
    const objects = await renderChart();
    expect(keyHolders(objects)).toEqual([]);
    expect(objects.filter((object) => object.metadata.name === 'acis-secrets')).toEqual([]);
    expect(apiEnv(objects).get('ACIS_MASTER_KEY')?.valueFrom).toEqual({
      secretKeyRef: { name: 'acis-secrets', key: 'ACIS_MASTER_KEY' },
    });
  });

  it('with secrets.existingSecret, renders and references that Secret', async () => {
    const objects = await renderChart({ set: ['secrets.existingSecret=acis-keys'] });
    expect(keyHolders(objects)).toEqual([]);
    const env = apiEnv(objects);
    for (const key of KEY_NAMES) expect(env.get(key)?.valueFrom).toEqual({ secretKeyRef: { name: 'acis-keys', key } });
  });

  it('with both keys given, writes them (the same on every render)', async () => {
    const set = [`secrets.masterKey=${MASTER_KEY}`, `secrets.adminToken=${ADMIN_TOKEN}`];
    const data = (find(await renderChart({ set }), 'Secret', 'acis-secrets') as unknown as Secret).data;
    expect(Buffer.from(data.ACIS_MASTER_KEY!, 'base64').toString()).toBe(MASTER_KEY);
    expect(Buffer.from(data.ACIS_ADMIN_TOKEN!, 'base64').toString()).toBe(ADMIN_TOKEN);
  });

  it.each([
    ['secrets.masterKey', `secrets.masterKey=${MASTER_KEY}`],
    ['secrets.adminToken', `secrets.adminToken=${ADMIN_TOKEN}`],
  ])('refuses %s alone, saying what to give', async (_name, pair) => {
    const result = await templateChart({ set: [pair] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('secrets: without a cluster to look the generated one up in');
    expect(result.stderr).toContain('give secrets.masterKey and secrets.adminToken together, or secrets.existingSecret');
  });
});

describe('charts/acis: helm install and upgrade against the Kubernetes API test server', () => {
  let server: KubeTestServer;
  const namespace = `${NAMESPACE}-gitops`;
  const release = ['acis', CHART, '--namespace', namespace];
  const storedKeys = () => (server.store.get('secrets', namespace, 'acis-secrets') as Secret).data;

  beforeAll(async () => {
    // No namespace up front: `--create-namespace` makes it after helm renders, so the render sees none.
    server = await startKubeTestServer();
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it('generates the master key and admin token at install, into a namespace made by the install', async () => {
    const installed = await helm(
      ['install', ...release, '--create-namespace', '--set', 'database.url=postgres://acis@db.example:5432/acis'],
      {
        kubeconfig: server.kubeconfigPath,
        timeoutMs: 90_000,
      },
    );
    expect(installed.code, installed.stderr).toBe(0);
    const data = storedKeys();
    expect(Buffer.from(Buffer.from(data.ACIS_MASTER_KEY!, 'base64').toString(), 'base64')).toHaveLength(32);
    expect(Buffer.from(data.ACIS_ADMIN_TOKEN!, 'base64').toString().length).toBeGreaterThanOrEqual(16);
  }, 120_000);

  it('keeps them across upgrades, and a render that sees the cluster writes the stored ones', async () => {
    const before = storedKeys();
    for (const replicas of [1, 2]) {
      const upgraded = await helm(['upgrade', ...release, '--reuse-values', '--set', `warmPool.replicas=${replicas}`], {
        kubeconfig: server.kubeconfigPath,
        timeoutMs: 90_000,
      });
      expect(upgraded.code, upgraded.stderr).toBe(0);
      expect(storedKeys()).toMatchObject({ ACIS_MASTER_KEY: before.ACIS_MASTER_KEY, ACIS_ADMIN_TOKEN: before.ACIS_ADMIN_TOKEN });
    }
    const rendered = await helm(
      ['template', ...release, '--dry-run=server', '--set', 'database.url=postgres://acis@db.example:5432/acis'],
      {
        kubeconfig: server.kubeconfigPath,
        timeoutMs: 60_000,
      },
    );
    expect(rendered.code, rendered.stderr).toBe(0);
    const objects = parseAllDocuments(rendered.stdout).map((document) => document.toJS() as RenderedObject);
    expect((find(objects, 'Secret', 'acis-secrets') as unknown as Secret).data).toMatchObject({
      ACIS_MASTER_KEY: before.ACIS_MASTER_KEY,
      ACIS_ADMIN_TOKEN: before.ACIS_ADMIN_TOKEN,
    });
  }, 240_000);
});
