/**
 * Conversations under ACIS_SANDBOX_PROVIDER=kubernetes with the egress proxy as its own process, as its
 * Deployment runs it (`egress-proxy/main.ts`): it holds no database credential and no master key, and
 * learns a runner pod's run through the API server's resolve listener (ACIS_EGRESS_RESOLVE_LISTEN) with
 * the resolve token from a file, as the chart mounts it. Runner pods reach that proxy only (the API
 * server's in-process one stays on loopback, unused); they trust its CA through a ConfigMap made from its
 * certificate, as an operator makes one. The model stub and echo servers (HTTP, and HTTPS under a CA of
 * their own) stand for the world. A host-bound secret reaches its host through it and is refused toward
 * any other (the run ends secret-destination-denied, the value at no surface).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningController } from '../../controller/controller.js';
import { tokenSecretName } from '../../controller/api/v1alpha1.js';
import { sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';
import { type DeploymentCa, loadOrCreateDeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { EGRESS_PROXY_NAME, MISSING_PATH, REFUSED_PATH, RESOLVE_PATH } from '../../egress-proxy/resolve-protocol.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import {
  createPool,
  NAMESPACE,
  type SandboxObject,
  startCluster,
  startTestController,
  type Cluster,
  eventually,
  untilPoolReady,
} from '../controller/harness.js';
import { type AcisProcess, cleanEnv, freePort, ROOT, startEgressProxyProcess, stopAcis } from '../helpers/acis-process.js';
import { type EchoServers, startEchoServers } from '../helpers/echo-servers.js';
import { isTerminal, type Line, parseNdjson, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { createTestDatabase, dropTestDatabase, startTestServer, type TestServer } from '../helpers/test-server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { runnerImage } from '../../hack/k8s/runner-image.js';

const RUNNER_IMAGE = 'acis-runner:standalone-egress';
const PLATFORM_KEY = `sk-platform-${randomBytes(12).toString('hex')}`;
const RESOLVE_TOKEN = randomBytes(32).toString('base64url');
const CA_CONFIGMAP = 'acis-egress-ca-cert';
const POOL = 'standalone-egress';

let stub: ModelStub;
let cluster: Cluster;
let controller: RunningController;
let t: TestServer;
let databaseUrl: string;
let scratch: string;
let proxy: AcisProcess | undefined;
let proxyPort: number;
let proxyMetricsPort: number;
let resolveUrl: string;
let deploymentCa: DeploymentCa;
let proxyAgent: HttpsAgent;
let key: string;
let user: ProvisionedUser;
let httpEchoPort: number;
let httpsEchoPort: number;
let echoServers: EchoServers | undefined;
let echoed: EchoServers['received'];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'acis-standalone-egress-'));
  stub = await startModelStub({ apiKey: PLATFORM_KEY });
  echoServers = await startEchoServers('standalone egress echo CA');
  ({ httpPort: httpEchoPort, httpsPort: httpsEchoPort, received: echoed } = echoServers);
  const echoCaFile = path.join(scratch, 'echo-ca.pem');
  await writeFile(echoCaFile, echoServers.caCertificatePem);
  cluster = await startCluster({ images: { [RUNNER_IMAGE]: runnerImage(ROOT) } });
  databaseUrl = await createTestDatabase();

  const resolvePort = await freePort();
  // The deployment CA, made ahead as the chart does: the proxy presents its leaves and takes its client
  // certificate from it, the API server its own certificate (the chart mounts the CA Secret into both).
  const proxyDataDir = path.join(scratch, 'proxy-data');
  deploymentCa = await loadOrCreateDeploymentCa(path.join(proxyDataDir, 'egress-ca'));
  t = await startTestServer({
    DATABASE_URL: databaseUrl,
    ANTHROPIC_BASE_URL: stub.url,
    ANTHROPIC_API_KEY: PLATFORM_KEY,
    ACIS_SANDBOX_PROVIDER: 'kubernetes',
    KUBECONFIG: cluster.server.kubeconfigPath,
    ACIS_K8S_NAMESPACE: NAMESPACE,
    ACIS_PING_INTERVAL_MS: '200',
    ACIS_EGRESS_RESOLVE_LISTEN: `127.0.0.1:${resolvePort}`,
    ACIS_EGRESS_RESOLVE_TOKEN: RESOLVE_TOKEN,
    ACIS_DEPLOYMENT_CA_DIR: path.join(proxyDataDir, 'egress-ca'),
    // The name the proxy dials the listener by (the resolve Service's, in a cluster).
    ACIS_EGRESS_RESOLVE_TLS_NAMES: 'localhost',
  });
  resolveUrl = `https://localhost:${resolvePort}`;
  const proxyLeaf = await deploymentCa.issueIdentity({ commonName: EGRESS_PROXY_NAME, usages: ['client'], validityMs: 3_600_000 });
  proxyAgent = new HttpsAgent({ ca: deploymentCa.certPem, cert: proxyLeaf.certPem, key: proxyLeaf.keyPem });

  // The proxy as its Deployment runs it: the token from a mounted file, the platform key from the chart's Secret.
  const tokenFile = path.join(scratch, 'resolve-token');
  await writeFile(tokenFile, `${RESOLVE_TOKEN}\n`, { mode: 0o600 });
  [proxyPort, proxyMetricsPort] = [await freePort(), await freePort()];
  proxy = await startEgressProxyProcess(
    cleanEnv({
      ACIS_DATA_DIR: proxyDataDir,
      ACIS_EGRESS_PORT: String(proxyPort),
      ACIS_EGRESS_METRICS_PORT: String(proxyMetricsPort),
      ACIS_EGRESS_RESOLVE_URL: resolveUrl,
      ACIS_EGRESS_RESOLVE_TOKEN_FILE: tokenFile,
      ANTHROPIC_BASE_URL: stub.url,
      ANTHROPIC_API_KEY: PLATFORM_KEY,
      ACIS_EGRESS_ALLOW: `127.0.0.1:${httpEchoPort},localhost:${httpsEchoPort}`,
      ACIS_EGRESS_EXTRA_CA: echoCaFile,
      // Every line it can write, so the leak checks below see the most.
      LOG_LEVEL: 'debug',
    }),
  );
  // The operator's ConfigMap of the proxy's CA certificate (never its key), which the controller mounts into runner pods.
  const caCertificate = await readFile(path.join(proxyDataDir, 'egress-ca', 'ca.crt'), 'utf8');
  cluster.server.store.create('configmaps', NAMESPACE, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: CA_CONFIGMAP, namespace: NAMESPACE },
    data: { 'ca.crt': caCertificate },
  } as unknown as KubeObject);

  controller = await startTestController(cluster, {
    runnerImage: RUNNER_IMAGE,
    egressProxyHost: '127.0.0.1',
    egressProxyPort: proxyPort,
    modelBaseUrl: stub.url,
    egressCaConfigMap: CA_CONFIGMAP,
    runnerResources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '2', memory: '2Gi' } },
    startTimeoutMs: 60_000,
  });
  ({ serviceKey: key } = await t.createIntegration('standalone egress'));
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
}, 180_000);

afterAll(async () => {
  if (proxy) await stopAcis(proxy);
  await t?.stop();
  await controller?.stop();
  await cluster?.close();
  await stub?.stop();
  echoServers?.close();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 60_000);

const sandboxOf = (conversationId: string) =>
  cluster.server.store.find('sandboxes', NAMESPACE, sandboxName(conversationId)) as SandboxObject | undefined;

/** A runner pod's egress credential, from its token Secret. */
function credentialOf(podName: string): { runner_id: string; token: string } {
  const secret = cluster.server.store.get('secrets', NAMESPACE, tokenSecretName(podName)) as KubeObject & { data: Record<string, string> };
  return { runner_id: podName, token: Buffer.from(secret.data['egress-token']!, 'base64').toString() };
}

/** A call to the resolve listener as the proxy makes it: over TLS with the proxy's certificate. */
function resolveCall(
  pathname: string,
  body: unknown,
  token: string | null = RESOLVE_TOKEN,
): Promise<{ status: number; cacheControl: string | null; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${resolveUrl}${pathname}`,
      {
        method: 'POST',
        agent: proxyAgent,
        headers: { 'content-type': 'application/json', ...(token !== null && { authorization: `Bearer ${token}` }) },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, cacheControl: res.headers['cache-control'] ?? null, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function proxyMetric(outcome: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${proxyMetricsPort}/metrics`)).text();
  return Number(new RegExp(`^acis_egress_requests_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** Every row of every table, as text: what a database dump would show. */
async function dumpDatabase(): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const tables = await client.query<{ table_name: string }>(
      "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'",
    );
    const dump: Record<string, unknown[]> = {};
    for (const { table_name } of tables.rows) dump[table_name] = (await client.query(`select * from "${table_name}"`)).rows;
    return JSON.stringify(dump);
  } finally {
    await client.end();
  }
}

/** A turn whose agent runs `command` in its Bash tool, ended failed by the platform with `slug`: its stream, and its lines. */
async function bashTurnEndingFailed(
  conversationId: string,
  command: string,
  status: number,
  slug: string,
): Promise<{ text: string; lines: Line[] }> {
  const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
    token: key,
    body: { content: `[[tool:Bash ${JSON.stringify({ command })}]]` },
  });
  const lines = withoutPings(parseNdjson(res.text));
  expect(lines.filter(isTerminal)).toHaveLength(1);
  expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed' } });
  expect(lines.at(-1)).toMatchObject({
    object: 'platform.event',
    type: 'error',
    problem: { status, type: expect.stringMatching(new RegExp(`/problems/${slug}$`)) },
  });
  return { text: res.text, lines };
}

describe('the egress proxy as its own process, resolving runs through the API server', () => {
  it('a canary reaches its destinations through the standalone proxy only while its run is in progress, the model through it too, and is found nowhere else', async () => {
    createPool(cluster, POOL, 1);
    const [poolPod] = await untilPoolReady(cluster, POOL, 1);
    const podName = poolPod!.metadata.name!;
    const credential = credentialOf(podName);
    // A pooled runner stands for no run: nothing to substitute.
    const idle = await resolveCall(RESOLVE_PATH, credential);
    expect(idle).toEqual({ status: 200, cacheControl: 'no-store', text: JSON.stringify({ in_progress: false }) });

    const canary = `canary-${randomBytes(12).toString('hex')}`;
    const created = await t.request('POST', '/conversations', {
      token: key,
      body: { user_id: user.userId, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
    });
    const conversationId: string = created.body.id;
    expect(
      (await t.request('PUT', `/conversations/${conversationId}/secrets`, { token: key, body: { secrets: { CANARY: canary } } })).status,
    ).toBe(200);
    const command = [
      `curl -s -H "X-Canary: {{secret:CANARY}}" http://127.0.0.1:${httpEchoPort}/canary`,
      `curl -sS -H "X-Canary: {{secret:CANARY}}" https://localhost:${httpsEchoPort}/canary-tls`,
      'env; echo {{secret:CANARY}}',
    ].join('; ');
    const response = await fetch(`${t.url}/conversations/${conversationId}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: `[[tool:Bash ${JSON.stringify({ command })}]]` }),
    });
    expect(response.status).toBe(200);
    // While the turn runs (its first agent line is out), the pod's credential stands for this run.
    let during: ReturnType<typeof resolveCall> | undefined;
    // (A ping can come first: the stream opens once the message is stored, while the runner gets ready.)
    const lines = withoutPings(
      await readLines(response, (line) => {
        if (line.event !== 'ping' && line.object !== 'platform.event') during ??= resolveCall(RESOLVE_PATH, credential);
      }),
    );
    expect(lines.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    const duringAnswer = await during!;
    expect(duringAnswer.status).toBe(200);
    expect(duringAnswer.cacheControl).toBe('no-store');
    // With the request that started the run: the standalone proxy's lines of the run's requests carry it.
    const requestId = response.headers.get('x-request-id');
    expect(JSON.parse(duringAnswer.text)).toEqual({ in_progress: true, secrets: { CANARY: canary }, request_id: requestId });
    // The pool's pod served it, and once its turn is over (the runner is released just after the last
    // line is out) its credential stands for nothing again, though the pod is still held warm.
    expect(sandboxOf(conversationId)!.status).toMatchObject({ launch: 'pool', podName });
    await until(
      async () => (await resolveCall(RESOLVE_PATH, credential)).text === JSON.stringify({ in_progress: false }),
      10_000,
      'the credential to stand for no run',
    );
    expect(sandboxOf(conversationId)!.status).toMatchObject({ podName });

    // Substituted at both upstreams (HTTPS: the pod trusted the standalone proxy's CA from the ConfigMap).
    expect(echoed.some((r) => r.path === '/canary' && r.headers['x-canary'] === canary)).toBe(true);
    expect(echoed.some((r) => r.path === '/canary-tls' && r.headers['x-canary'] === canary)).toBe(true);
    // The model was reached through the standalone proxy (the stub refuses any key but the platform's),
    // and the API server's in-process proxy forwarded nothing.
    expect(stub.agentRequests().length).toBeGreaterThan(0);
    expect(await proxyMetric('forwarded')).toBeGreaterThanOrEqual(3);
    const proxyLines = proxy!
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const forwardedOfRun = proxyLines.filter((l) => l.msg === 'egress request' && l.runner_id === podName);
    expect(forwardedOfRun.map((l) => l.destination)).toEqual(
      expect.arrayContaining([`127.0.0.1:${httpEchoPort}`, `localhost:${httpsEchoPort}`, new URL(stub.url).host]),
    );
    for (const line of forwardedOfRun) expect(line.request_id, JSON.stringify(line)).toBe(requestId);
    const apiMetrics = await t.request('GET', '/metrics', { token: null });
    expect(apiMetrics.text).not.toMatch(/^acis_egress_requests_total\{outcome="forwarded"\} [1-9]/m);
    expect(JSON.stringify(stub.agentRequests())).toContain('{{secret:CANARY}}');

    const pod = cluster.server.store.get('pods', NAMESPACE, podName) as KubeObject & {
      spec: { volumes?: Array<{ configMap?: { name: string } }> };
    };
    expect(pod.spec.volumes).toContainEqual(expect.objectContaining({ configMap: expect.objectContaining({ name: CA_CONFIGMAP }) }));
    // Responses, stream lines, the logs of the API server, the proxy and the runner, the cluster's objects, the database.
    const everything = [
      JSON.stringify(lines),
      (await t.request('GET', `/conversations/${conversationId}/messages`, { token: key })).text,
      ...t.logs,
      proxy!.output(),
      ...cluster.kubelet.processes().map((p) => cluster.kubelet.logs(p.namespace, p.pod)),
      ...['sandboxes', 'secrets', 'pods', 'configmaps'].map((kind) => JSON.stringify(cluster.server.store.list(kind, NAMESPACE).items)),
      await dumpDatabase(),
    ].join('\n');
    expect(everything).not.toContain(canary);
    expect(JSON.stringify(stub.requests)).not.toContain(canary);
    expect(everything).not.toContain(PLATFORM_KEY);
    expect(proxy!.output()).not.toContain(RESOLVE_TOKEN);
    expect(t.logs.join('\n')).not.toContain(RESOLVE_TOKEN);

    cluster.server.store.delete('sandboxwarmpools', NAMESPACE, POOL);
    expect((await t.request('DELETE', `/conversations/${conversationId}`, { token: key })).status).toBe(204);
    await eventually(cluster, () => !sandboxOf(conversationId), 30_000);
  });

  it('a secret missing at the standalone proxy ends the run with the missing-secret error line', async () => {
    const created = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
    // Assembled by the shell, so the send-time scan cannot see it.
    const command = `curl -s -H "X-Token: {{secret:NO""PE}}" http://127.0.0.1:${httpEchoPort}/nope; sleep 20`;
    const { lines } = await bashTurnEndingFailed(created.body.id, command, 422, 'missing-secret');
    expect(lines.at(-1)!.problem.detail).toContain('NOPE');
    expect(echoed.some((r) => r.path === '/nope')).toBe(false);
    expect(await proxyMetric('missing-secret')).toBeGreaterThanOrEqual(1);
  });

  it('the standalone proxy’s refusals become Warning Events on the runner’s Sandbox, one per reason with its count', async () => {
    const created = await t.request('POST', '/conversations', {
      token: key,
      body: { user_id: user.userId, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
    });
    const conversationId: string = created.body.id;
    // A private address the proxy refuses, asked again and again (a runner repeating a refusal at will).
    const command = 'for i in $(seq 1 12); do curl -s -o /dev/null http://10.255.255.1:81/probe; done; echo done';
    const done = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: `[[tool:Bash ${JSON.stringify({ command })}]]` },
    });
    expect(done.body.status).toBe('completed');
    const sandbox = sandboxOf(conversationId)!;
    const refusals = () =>
      (cluster.server.store.list('events', NAMESPACE).items as any[]).filter(
        (e) =>
          e.involvedObject.kind === 'Sandbox' && e.involvedObject.uid === sandbox.metadata.uid && e.reason === 'EgressDestinationRefused',
      );
    // Twelve refusals, one Event: created at the first, its count brought up to date within the window.
    const [event] = await eventually(cluster, () => refusals().length === 1 && refusals()[0].count === 12 && refusals(), 30_000);
    expect(refusals()).toHaveLength(1);
    expect(event).toMatchObject({ type: 'Warning', involvedObject: { name: sandbox.metadata.name, apiVersion: 'acis.dev/v1alpha1' } });
    expect(event.message).toContain('10.255.255.1:81');
    expect(await proxyMetric('destination-refused')).toBeGreaterThanOrEqual(12);

    // A missing secret is told there too (and ends the run).
    const missing = `curl -s -H "X-Token: {{secret:GO""NE}}" http://127.0.0.1:${httpEchoPort}/gone; sleep 20`;
    const failed = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: `[[tool:Bash ${JSON.stringify({ command: missing })}]]` },
    });
    expect(failed.status).toBe(422);
    expect(failed.body.type).toMatch(/\/problems\/missing-secret$/);
    const told = await eventually(cluster, () =>
      (cluster.server.store.list('events', NAMESPACE).items as any[]).find(
        (e) => e.involvedObject.uid === sandbox.metadata.uid && e.reason === 'EgressSecretMissing',
      ),
    );
    expect(told).toMatchObject({ type: 'Warning', count: 1 });
    expect(told.message).toContain('{{secret:GONE}}');
    expect((await t.request('DELETE', `/conversations/${conversationId}`, { token: key })).status).toBe(204);
    await eventually(cluster, () => !sandboxOf(conversationId), 30_000);
  });

  it('the resolve listener answers nothing without its token, and a credential that stands for no run gets no values', async () => {
    const someone = { runner_id: 'acis-runner-nobody', token: 'not-a-token' };
    for (const token of [null, 'wrong-token-0123456789-0123456789-0123', `${RESOLVE_TOKEN}x`]) {
      for (const pathname of [RESOLVE_PATH, MISSING_PATH, REFUSED_PATH]) {
        const refused = await resolveCall(pathname, { ...someone, alias: 'X' }, token);
        expect(refused.status, `${token} ${pathname} ${refused.text}`).toBe(401);
        expect(refused.cacheControl).toBe('no-store');
        expect(JSON.parse(refused.text)).toEqual({ error: 'unauthorized' });
      }
    }
    expect(t.logs.some((line) => line.includes('egress resolve call refused'))).toBe(true);
    expect(t.logs.join('\n')).not.toContain('wrong-token-0123456789');
    expect(await resolveCall(RESOLVE_PATH, someone)).toMatchObject({ status: 200, text: JSON.stringify({ in_progress: false }) });
    expect(await resolveCall(MISSING_PATH, { ...someone, alias: 'X' })).toMatchObject({
      status: 200,
      text: JSON.stringify({ in_progress: false }),
    });
    // A refusal told for a credential that stands for no run records nothing.
    const told = { ...someone, outcome: 'destination-refused', destination: '10.0.0.1:80', detail: 'private address' };
    expect(await resolveCall(REFUSED_PATH, told)).toMatchObject({ status: 200, text: JSON.stringify({ in_progress: false }) });
    expect((await resolveCall(REFUSED_PATH, { ...told, outcome: 'anything' })).status).toBe(400);
    expect((await resolveCall(RESOLVE_PATH, { runner_id: 'x' })).status).toBe(400);
  });

  it('a bound secret reaches its host, is refused toward another, and the run ends secret-destination-denied; the value is nowhere', async () => {
    const canary = `canary-${randomBytes(12).toString('hex')}`;
    const created = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
    const conversationId: string = created.body.id;
    const put = await t.request('PUT', `/conversations/${conversationId}/secrets`, {
      token: key,
      body: { secrets: { TENANT_KEY: { value: canary, allowed_hosts: [`localhost:${httpsEchoPort}`] } } },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data[0].allowed_hosts).toEqual([`localhost:${httpsEchoPort}`]);
    const command = [
      `curl -sS -H "X-Canary: {{secret:TENANT_KEY}}" https://localhost:${httpsEchoPort}/allowed`,
      `curl -s http://127.0.0.1:${httpEchoPort}/collect -d '{{secret:TENANT_KEY}}'`,
      'sleep 20',
    ].join('; ');
    const { text, lines } = await bashTurnEndingFailed(conversationId, command, 403, 'secret-destination-denied');
    expect(lines.at(-1)!.problem.detail).toContain('TENANT_KEY');
    expect(lines.at(-1)!.problem.detail).toContain(`127.0.0.1:${httpEchoPort}`);
    expect(echoed.some((r) => r.path === '/allowed' && r.headers['x-canary'] === canary)).toBe(true);
    expect(echoed.some((r) => r.path === '/collect')).toBe(false);
    expect(await proxyMetric('secret-destination-denied')).toBe(1);
    expect(proxy!.output()).toContain('bound secret toward a destination outside its hosts');

    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    let dump = '';
    try {
      const tables = await client.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'",
      );
      for (const { table_name } of tables.rows) dump += JSON.stringify((await client.query(`select * from "${table_name}"`)).rows);
    } finally {
      await client.end();
    }
    const everything = [
      text,
      (await t.request('GET', `/conversations/${conversationId}/messages`, { token: key })).text,
      ...t.logs,
      proxy!.output(),
      ...cluster.kubelet.processes().map((p) => cluster.kubelet.logs(p.namespace, p.pod)),
      ...['sandboxes', 'secrets', 'pods', 'configmaps'].map((kind) => JSON.stringify(cluster.server.store.list(kind, NAMESPACE).items)),
      dump,
    ].join('\n');
    expect(everything).not.toContain(canary);
  });

  it('with the API server unreachable, the proxy refuses with 503 and forwards nothing', async () => {
    const before = echoed.length;
    // Reachable, a credential that stands for no run is refused as such.
    expect(await proxiedGet(`http://127.0.0.1:${httpEchoPort}/while-up`)).toEqual({ status: 407, error: 'proxy-auth-required' });
    // Counted from here: the count covers the proxy's whole life, and on a loaded machine a lookup of an
    // earlier test may have timed out.
    const failedBefore = await proxyMetric('lookup-failed');
    // Down, the proxy cannot know whether it stands for a run, so it refuses rather than guess.
    await t.stop();
    expect(await proxiedGet(`http://127.0.0.1:${httpEchoPort}/while-down`)).toEqual({ status: 503, error: 'lookup-failed' });
    expect(echoed.length).toBe(before);
    expect(await proxyMetric('lookup-failed')).toBe(failedBefore + 1);
  });
});

/** A plain-HTTP request through the standalone proxy with a credential of no runner. */
function proxiedGet(url: string): Promise<{ status: number; error: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'GET',
      path: url,
      headers: { 'proxy-authorization': `Basic ${Buffer.from('acis-runner-nobody:not-a-token').toString('base64')}` },
    });
    req.once('response', (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, error: res.headers['x-acis-egress-error'] as string | undefined });
    });
    req.once('error', reject);
    req.end();
  });
}

/** Polls `check` (an HTTP answer has no event to await) until it holds. */
async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
    if (await check()) return;
  }
  throw new Error(`timed out waiting for ${what}`);
}
