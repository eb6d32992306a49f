/**
 * An API replica killed (SIGKILL) while it hosts a streaming run, kubernetes provider: two API
 * servers on one database and the simulated cluster. Replica A runs in the test process (its egress
 * proxy is the one runner pods use) with the controller; replica B is `acis serve` in its own process,
 * hosts the run on a runner pod and is killed. The runner pod outlives B, and A takes the turn over
 * once B's liveness row goes stale (docs/runtime.md): what the client had is stored with the numbers
 * it counted, and a re-attach on A with that count sees the rest once, ending with the turn's result.
 * B is killed before the first line (A starts the turn again), mid-stream and right before the
 * terminal line. With the runner pod gone too, the run ends `failed` with an error line, within seconds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningController } from '../../controller/controller.js';
import { runnerImage } from '../../hack/k8s/runner-image.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { type Cluster, NAMESPACE, startCluster, startTestController } from '../controller/harness.js';
import { freePort } from '../helpers/acis-process.js';
import { sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';
import type { Sandbox } from '../../controller/api/v1alpha1.js';
import {
  expectCompletedOnSurvivor,
  expectFailedOnSurvivor,
  isDelta,
  killDuringTurn,
  livenessEnv,
  reattach,
  slowReply,
  slowTurn,
  useReplicaPair,
} from '../helpers/replica-kill.js';
import { hmacAssertion } from '../helpers/approver.js';
import { type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { ADMIN_TOKEN } from '../helpers/test-server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const RUNNER_IMAGE = 'acis-runner:replica-crash';
const MASTER_KEY = randomBytes(32).toString('base64');
const PLATFORM_KEY = `sk-platform-${randomBytes(12).toString('hex')}`;
const CA_CONFIGMAP = 'acis-egress-ca';
const STALE_SECONDS = 2;

let stub: ModelStub;
let cluster: Cluster;
let controller: RunningController;
let egressPort: number;
/** Where the replicas' shared deployment CA is made: runner pods admit either replica by its certificate of it. */
let caParent: string;

beforeAll(async () => {
  caParent = await mkdtemp(path.join(tmpdir(), 'acis-replica-crash-ca-'));
  stub = await startModelStub({ apiKey: PLATFORM_KEY });
  cluster = await startCluster({ images: { [RUNNER_IMAGE]: runnerImage(ROOT) } });
  egressPort = await freePort();
  controller = await startTestController(cluster, {
    runnerImage: RUNNER_IMAGE,
    egressProxyHost: '127.0.0.1',
    egressProxyPort: egressPort,
    modelBaseUrl: stub.url,
    egressCaConfigMap: CA_CONFIGMAP,
    runnerResources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '2', memory: '2Gi' } },
    startTimeoutMs: 60_000,
  });
}, 180_000);
afterAll(async () => {
  await controller?.stop();
  await cluster?.close();
  await stub?.stop();
  if (caParent) await rm(caParent, { recursive: true, force: true });
});

/** B hosts the runs and is killed; A, whose egress proxy runner pods use, survives and takes them over. */
const kit = useReplicaPair({
  name: 'replica crash, kubernetes',
  env: (databaseUrl) => ({
    DATABASE_URL: databaseUrl,
    ACIS_MASTER_KEY: MASTER_KEY,
    ANTHROPIC_BASE_URL: stub.url,
    ANTHROPIC_API_KEY: PLATFORM_KEY,
    ACIS_SANDBOX_PROVIDER: 'kubernetes',
    KUBECONFIG: cluster.server.kubeconfigPath,
    ACIS_K8S_NAMESPACE: NAMESPACE,
    ACIS_DEPLOYMENT_CA_DIR: path.join(caParent, 'ca'),
    ...livenessEnv(STALE_SECONDS),
  }),
  survivorEnv: () => ({ ACIS_EGRESS_LISTEN: `127.0.0.1:${egressPort}`, ACIS_EGRESS_CA_CONFIGMAP: CA_CONFIGMAP }),
});

const sandboxOf = (conversationId: string) =>
  cluster.server.store.find('sandboxes', NAMESPACE, sandboxName(conversationId)) as Sandbox | undefined;

describe('a replica killed while it hosts a run (kubernetes provider)', () => {
  it('mid-stream: A takes the turn over on its runner pod; the client re-attached on A sees every line once and the turn completes', async () => {
    let deltas = 0;
    const run = await killDuringTurn(kit, slowTurn(12, 150), (line) => isDelta(line) && ++deltas === 4);
    expect(run.received.filter(isDelta).length).toBeGreaterThanOrEqual(4);
    await expectCompletedOnSurvivor(kit, run, slowReply(12));

    const next = await kit.survivor.request('POST', `/conversations/${run.conversationId}/messages?stream=false`, {
      token: kit.serviceKey,
      body: { content: '[[reply: after the crash]]' },
    });
    expect(next.status, next.text).toBe(201);
    expect(next.body).toMatchObject({ status: 'completed', content: 'after the crash' });
  }, 180_000);

  it('right before the terminal line: A takes the turn over and the client gets message_end and the result once', async () => {
    const late = await killDuringTurn(kit, slowTurn(4, 50), (line) => line.type === 'assistant');
    expect(late.received.at(-1)?.type).toBe('assistant');
    await expectCompletedOnSurvivor(kit, late, slowReply(4));
  }, 180_000);

  it('before the first line: A starts the turn again, and the client re-attached with 0 sees it once, completed', async () => {
    const early = await killDuringTurn(kit, slowTurn(4, 50));
    expect(early.received).toEqual([]);
    await expectCompletedOnSurvivor(kit, early, slowReply(4));
  }, 180_000);

  it('parked on an approval: the approval raised through B expires, the runner asks again on A, and approving that one completes the turn', async () => {
    const approverKey = await kit.survivor.request('POST', `/admin/tenants/${kit.tenantId}/approver-keys`, {
      token: ADMIN_TOKEN,
      body: { algorithm: 'hmac-sha256' },
    });
    expect(approverKey.status).toBe(201);
    const input = { reason: 'Deploy to production', requested_items: [{ kind: 'action', description: 'deploy v2' }] };
    const isApproval = (line: Line) => line.object === 'platform.event' && line.type === 'approval';
    const run = await killDuringTurn(kit, `[[tool:mcp__platform__request_approval ${JSON.stringify(input)}]]`, isApproval);
    const first = run.received.at(-1)!.approval.id as string;

    const response = await fetch(
      `${kit.survivor.url}/conversations/${run.conversationId}/messages/${run.messageId}/stream?after=${run.received.length}`,
      {
        headers: { authorization: `Bearer ${kit.serviceKey}` },
      },
    );
    let approving: Promise<{ status: number }> | undefined;
    const rest = withoutPings(
      await readLines(response, (line) => {
        if (!isApproval(line) || approving) return;
        const signature = hmacAssertion(line.approval.id, 'approve', { id: approverKey.body.id, secret: approverKey.body.secret });
        approving = kit.survivor.request('POST', `/approvals/${line.approval.id}/approve`, { token: kit.serviceKey, body: { signature } });
      }),
    );
    expect((await approving)?.status).toBe(200);
    const raisedAgain = rest.filter(isApproval);
    expect(raisedAgain).toHaveLength(1);
    expect(raisedAgain[0]!.approval.id).not.toBe(first);
    expect((await kit.survivor.request('GET', `/approvals/${first}`, { token: kit.serviceKey })).body).toMatchObject({ status: 'expired' });
    expect(rest.slice(-2).map((line) => line.type)).toEqual(['message_end', 'result']);
    expect(rest.at(-2)!.message).toMatchObject({ id: run.messageId, status: 'completed' });
    expect(JSON.stringify(rest.filter((l) => l.type === 'user'))).toContain('Approved by approver_key:');
    const replay = withoutPings(
      await readLines(
        await fetch(`${kit.survivor.url}/conversations/${run.conversationId}/messages/${run.messageId}/stream?after=0`, {
          headers: { authorization: `Bearer ${kit.serviceKey}` },
        }),
      ),
    );
    expect([...run.received, ...rest]).toEqual(replay);
    expect(replay.filter((line) => line.type === 'error' || line.type === 'result')).toHaveLength(1);
  }, 180_000);

  it('a replica taken for dead while alive (paused past the stale time) loses the run to A and, resumed, changes nothing of it', async () => {
    const victim = await kit.victim();
    const created = await kit.survivor.request('POST', '/conversations', {
      token: kit.serviceKey,
      body: { user_id: kit.userId, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
    });
    expect(created.status).toBe(201);
    const conversationId: string = created.body.id;
    const response = await fetch(`${victim.url}/conversations/${conversationId}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${kit.serviceKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: slowTurn(12, 150) }),
    });
    expect(response.status).toBe(200);
    const messageId = response.headers.get('x-service-message-id')!;
    let deltas = 0;
    let pausedAt = 0;
    const received: Line[] = [];
    // B's own stream, read to its end: it goes on once B is resumed.
    const fromB = readLines(response, (line) => {
      if (pausedAt || line.event === 'ping') return;
      received.push(line);
      if (isDelta(line) && ++deltas === 4) {
        pausedAt = Date.now();
        victim.process.kill('SIGSTOP');
      }
    });
    while (!pausedAt) await new Promise((resolve) => setTimeout(resolve, 20));
    const run = { conversationId, messageId, received, killedAt: pausedAt };
    await expectCompletedOnSurvivor(kit, run, slowReply(12));
    const held = sandboxOf(conversationId);
    expect(held).toBeTruthy();

    victim.process.kill('SIGCONT');
    // B finds its runner connection gone to A and its turn ended: what it streams to its own client is stored nowhere.
    const fromBLines = withoutPings(await fromB);
    expect(fromBLines.at(-1)?.type).toBe('error');
    const replay = await reattach(kit, run, 0);
    expect(replay.at(-1)).toMatchObject({ type: 'result' });
    expect(
      (await kit.survivor.request('GET', `/conversations/${conversationId}/messages`, { token: kit.serviceKey })).body.data[0],
    ).toMatchObject({
      id: messageId,
      status: 'completed',
      content: slowReply(12),
    });
    // B left the Sandbox A holds warm alone (B's release came before its last line), and the conversation goes on.
    const after = sandboxOf(conversationId);
    expect(after?.metadata.uid).toBe(held!.metadata.uid);
    expect(after?.metadata.deletionTimestamp).toBeUndefined();
    const next = await kit.survivor.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: kit.serviceKey,
      body: { content: '[[reply: still here]]' },
    });
    expect(next.status, next.text).toBe(201);
    expect(next.body).toMatchObject({ status: 'completed', content: 'still here' });
    expect(sandboxOf(conversationId)?.metadata.uid).toBe(held!.metadata.uid);
  }, 180_000);

  it('with the runner pod gone too: the run ends failed within seconds, with message_end and the error line after the lines the client had', async () => {
    let deltas = 0;
    const orphaned = await killDuringTurn(kit, slowTurn(12, 150), (line) => isDelta(line) && ++deltas === 3);
    const podName = sandboxOf(orphaned.conversationId)?.status?.podName;
    expect(podName).toBeTruthy();
    await cluster.kubelet.kill(NAMESPACE, podName!, { signal: 'SIGKILL' });
    await expectFailedOnSurvivor(kit, orphaned, (STALE_SECONDS + 3) * 1000);
  }, 180_000);
});
