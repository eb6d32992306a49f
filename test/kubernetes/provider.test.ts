/**
 * KubernetesSandboxProvider against the Kubernetes API test server, the simulated kubelet and the
 * controller in process: what it writes to the cluster, what two API replicas see, capacity, holds,
 * and a pod dying under a turn. The runner in these pods is the controller suites' fixture (it
 * answers a connection with whether it got its token), reached by `greetingConnector`.
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest, openDatabase, type DatabaseHandle } from '../../api-server/core/db/database.js';
import { databaseRunnerRecords, type RunnerRecords } from '../../api-server/sandboxes/kubernetes/records.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';
import type { RunningController } from '../../controller/controller.js';
import { KubernetesSandboxProvider, type RunnerConnector } from '../../api-server/sandboxes/kubernetes/provider.js';
import { SandboxClient } from '../../api-server/sandboxes/kubernetes/sandboxes.js';
import { sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';
import { CapacityExhausted, type Lease, type SandboxProvider } from '../../api-server/sandboxes/provider.js';
import {
  conversationId,
  eventually,
  NAMESPACE,
  type SandboxObject,
  startCluster,
  startTestController,
  type Cluster,
} from '../controller/harness.js';
import { coldPodName, tokenSecretName } from '../../controller/api/v1alpha1.js';
import { greetingConnector, quietLogger, StateLog } from './provider-harness.js';

let cluster: Cluster;
let controller: RunningController;
const providers: KubernetesSandboxProvider[] = [];
const TENANT = 'tnt_K8SPROVIDER';

beforeAll(async () => {
  cluster = await startCluster();
  controller = await startTestController(cluster, { maxSandboxes: 2 });
});
afterAll(async () => {
  for (const provider of providers) await provider.stop();
  await controller?.stop();
  await cluster?.close();
});

/** A provider as one API replica builds it; `states` records what the conversation rows would show. */
async function replica(
  now?: () => number,
  connect: RunnerConnector = greetingConnector,
  records?: RunnerRecords,
): Promise<{ provider: KubernetesSandboxProvider; states: StateLog }> {
  const states = new StateLog();
  const provider = new KubernetesSandboxProvider({
    client: new SandboxClient(cluster.kubeConfig, NAMESPACE, quietLogger),
    connect,
    logger: quietLogger,
    onSandboxState: async (conversation, state) => {
      states.record({ conversation, ...state });
    },
    readyTimeoutMs: 20_000,
    ...(now && { now }),
    ...(records && { records }),
  });
  await provider.start();
  providers.push(provider);
  return { provider, states };
}

const request = (conversation: string) => ({ agentType: 'vendor-agent-sdk', conversationId: conversation, tenantId: TENANT });
const sandboxesOf = (conversation: string) =>
  cluster.server.store.list('sandboxes', NAMESPACE, { labelSelector: `acis.dev/conversation=${conversation}` }).items as SandboxObject[];
const sandboxGone = (conversation: string) => eventually(cluster, () => sandboxesOf(conversation).length === 0);

async function release(provider: SandboxProvider, lease: Lease, options: Parameters<SandboxProvider['release']>[1] = {}) {
  return provider.release(lease, options);
}

describe('KubernetesSandboxProvider and a forged Sandbox status', () => {
  it('dials only the ready pod the Sandbox controls, at its pod IP, with its own Secret; a status naming another pod, address or Secret is logged and ignored', async () => {
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    const dialed: Array<{ id: string; host: string; port: number }> = [];
    const client = new SandboxClient(cluster.kubeConfig, NAMESPACE, quietLogger);
    const provider = new KubernetesSandboxProvider({
      client,
      connect: (endpoint) => {
        dialed.push({ id: endpoint.id, host: endpoint.host, port: endpoint.port });
        return greetingConnector(endpoint);
      },
      logger,
      onSandboxState: async () => {},
      readyTimeoutMs: 30_000,
    });
    await provider.start();
    providers.push(provider);
    // A victim: another conversation's runner, its pod and its token Secret.
    const victim = await provider.acquire(request(conversationId()), { wait: false });
    const victimAt = dialed.pop()!;

    const conversation = conversationId();
    const name = sandboxName(conversation);
    // The controller writes no status and makes no pod for now: the attacker's status is all there is.
    cluster.server.failNext({ verb: 'update', resource: 'sandboxes', subresource: 'status', status: 500, times: 1_000_000 });
    cluster.server.failNext({ verb: 'create', resource: 'pods', status: 500, times: 1_000_000 });
    const secretReads = () => cluster.server.countRequests({ method: 'GET', resource: 'secrets', name: tokenSecretName(victim.runner.id) });
    const readsBefore = secretReads();
    try {
      const acquiring = provider.acquire(request(conversation), { wait: true });
      await eventually(cluster, () => sandboxesOf(conversation).length === 1);
      // Whoever may write Sandbox status (not pods, not Secrets) points it at the victim's pod, address and Secret.
      await cluster.kubeConfig.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
        {
          group: 'acis.dev',
          version: 'v1alpha1',
          namespace: NAMESPACE,
          plural: 'sandboxes',
          name,
          body: {
            status: {
              phase: 'Ready',
              podName: victim.runner.id,
              endpoint: `${victimAt.host}:${victimAt.port}`,
              tokenSecretName: tokenSecretName(victim.runner.id),
              conditions: [{ type: 'Ready', status: 'True', reason: 'RunnerReady', lastTransitionTime: new Date().toISOString() }],
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      // The provider has seen it: nothing is dialed, the victim's Secret is not read; the turn waits.
      await eventually(cluster, () => client.cached(name)?.status?.podName === victim.runner.id);
      expect(dialed).toEqual([]);
      // The Sandbox's own pod comes; the forged status stays.
      cluster.server.clearFailures();
      cluster.server.failNext({ verb: 'update', resource: 'sandboxes', subresource: 'status', status: 500, times: 1_000_000 });
      const lease = await acquiring;
      const own = cluster.server.store.get('pods', NAMESPACE, lease.runner.id) as unknown as V1Pod;
      expect(lease.runner.id).not.toBe(victim.runner.id);
      const ownPort = own.spec!.containers[0]!.ports!.find((port) => port.name === 'control')!.containerPort;
      expect(dialed).toEqual([{ id: lease.runner.id, host: own.status!.podIP, port: ownPort }]);
      expect(secretReads()).toBe(readsBefore);
      expect((lease.runner as unknown as { greeting: string }).greeting).toBe('runner has a token');
      const warning = warnings.find((line) => line.includes('a Sandbox status names another runner than its pod'));
      expect(warning).toContain(`its status names pod ${victim.runner.id}, address ${victimAt.host}:${victimAt.port}, token Secret`);
      expect(warning).toContain(`the ready runner pod it controls is ${lease.runner.id}`);
      await release(provider, lease, { broken: true });
    } finally {
      cluster.server.clearFailures();
    }
    await release(provider, victim, { broken: true });
  });
});

describe('KubernetesSandboxProvider and a token Secret it did not make', () => {
  it('does not use the tokens of a Secret that has the right name but neither the pod nor the Sandbox owns', async () => {
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    const dialed: string[] = [];
    const provider = new KubernetesSandboxProvider({
      client: new SandboxClient(cluster.kubeConfig, NAMESPACE, quietLogger),
      connect: (endpoint) => {
        dialed.push(endpoint.id);
        return greetingConnector(endpoint);
      },
      logger,
      onSandboxState: async () => {},
      readyTimeoutMs: 30_000,
    });
    await provider.start();
    providers.push(provider);
    const conversation = conversationId();
    cluster.server.failNext({ verb: 'create', resource: 'pods', status: 500, times: 1_000_000 });
    try {
      const acquiring = provider.acquire(request(conversation), { wait: true });
      const sandbox = await eventually(cluster, () => sandboxesOf(conversation)[0]);
      const forgedPod = coldPodName(sandbox as unknown as { metadata: { name: string; uid: string } });
      const secretName = tokenSecretName(forgedPod);
      // Someone with Secret write rights puts tokens of theirs under the name the pod will read.
      const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
      await eventually(cluster, () => cluster.server.store.find('secrets', NAMESPACE, secretName));
      await core.deleteNamespacedSecret({ name: secretName, namespace: NAMESPACE });
      await core.createNamespacedSecret({
        namespace: NAMESPACE,
        body: { metadata: { name: secretName }, stringData: { token: 'forged-token-0123456789', 'egress-token': 'forged-egress-0123' } },
      });
      cluster.server.clearFailures();
      const lease = await acquiring;
      // The forged pod was never dialed; the conversation got a new Sandbox whose pod's Secret is its own.
      expect(dialed).not.toContain(forgedPod);
      expect(lease.runner.id).not.toBe(forgedPod);
      expect(warnings.join('\n')).toContain(`Secret ${secretName} is owned by neither runner pod ${forgedPod} nor its Sandbox`);
      expect(warnings.join('\n')).not.toContain('forged-token');
      await release(provider, lease, { broken: true });
    } finally {
      cluster.server.clearFailures();
    }
  });
});

describe('KubernetesSandboxProvider.acquire / release', () => {
  it('creates the conversation’s Sandbox with its labels and spec, connects with the pod’s token, and deletes it on release', async () => {
    const { provider } = await replica();
    const conversation = conversationId();
    const lease = await provider.acquire(request(conversation), { wait: false });

    const [sandbox] = sandboxesOf(conversation);
    expect(sandbox!.metadata.name).toBe(sandboxName(conversation));
    expect(sandbox!.metadata.labels).toMatchObject({
      'acis.dev/tenant': TENANT,
      'acis.dev/conversation': conversation,
      'acis.dev/agent-type': 'vendor-agent-sdk',
    });
    expect(sandbox!.spec).toMatchObject({ conversationId: conversation, tenantId: TENANT, agentType: 'vendor-agent-sdk', mode: 'pooled' });
    expect(lease.continuing).toBe(false);
    expect(lease.runner.id).toBe(sandbox!.status?.podName);
    // The fixture runner says whether it was started with a token; the connector checked it sent the Secret's.
    expect((lease.runner as unknown as { greeting: string }).greeting).toBe('runner has a token');
    expect(provider.views()).toEqual([expect.objectContaining({ id: lease.runner.id, state: 'busy', conversationId: conversation })]);

    expect(await release(provider, lease)).toEqual({ heldUntil: null });
    await sandboxGone(conversation);
    expect(provider.views()).toEqual([]);
    expect(lease.runner.alive).toBe(false);
  });

  it('connects as soon as the pod its Sandbox controls is ready, not waiting for the controller’s Ready status', async () => {
    const { provider } = await replica();
    const conversation = conversationId();
    // Every status write of the controller fails: only the pod can say the runner is ready.
    cluster.server.failNext({ verb: 'update', resource: 'sandboxes', subresource: 'status', status: 500, times: 1_000_000 });
    try {
      const lease = await provider.acquire(request(conversation), { wait: false });
      const [sandbox] = sandboxesOf(conversation);
      expect(sandbox!.status?.phase).toBeUndefined();
      const pods = cluster.server.store.list('pods', NAMESPACE, { labelSelector: `acis.dev/sandbox=${sandbox!.metadata.name}` }).items;
      expect(pods.map((pod) => pod.metadata.name)).toEqual([lease.runner.id]);
      expect(pods[0]!.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Sandbox', uid: sandbox!.metadata.uid, controller: true }),
      ]);
      expect((lease.runner as unknown as { greeting: string }).greeting).toBe('runner has a token');
      cluster.server.clearFailures();
      await eventually(cluster, () => sandboxesOf(conversation)[0]?.status?.phase === 'Ready');
      expect(await release(provider, lease)).toEqual({ heldUntil: null });
      await sandboxGone(conversation);
    } finally {
      cluster.server.clearFailures();
    }
  });

  it('two replicas acquiring for one conversation at once get one Sandbox', async () => {
    const [a, b] = [await replica(), await replica()];
    const conversation = conversationId();
    const creates = () => cluster.server.countRequests({ method: 'POST', resource: 'sandboxes' });
    const before = creates();
    const [leaseA, leaseB] = await Promise.all([
      a.provider.acquire(request(conversation), { wait: false }),
      b.provider.acquire(request(conversation), { wait: false }),
    ]);
    expect(creates() - before).toBe(2);
    expect(sandboxesOf(conversation)).toHaveLength(1);
    expect(leaseA.runner.id).toBe(leaseB.runner.id);
    await release(a.provider, leaseA, { broken: true });
    await release(b.provider, leaseB, { broken: true });
    await sandboxGone(conversation);
  });

  it('a release with a hold moves shutdownTime and keeps the Sandbox for the conversation on any replica', async () => {
    const [a, b] = [await replica(), await replica()];
    const conversation = conversationId();
    const first = await a.provider.acquire(request(conversation), { wait: false });
    const started = Date.now();
    const { heldUntil } = await a.provider.release(first, { hold: { idleTtlSeconds: 120, maxConcurrentWarm: 5 } });
    expect(heldUntil!.getTime()).toBeGreaterThanOrEqual(started + 119_000);
    const [held] = sandboxesOf(conversation);
    expect(held!.spec).toMatchObject({ mode: 'warm', shutdownTime: heldUntil!.toISOString(), maxConcurrentWarm: 5 });
    expect(a.states.changes).toEqual([{ conversation, warm: true, expiresAt: heldUntil }]);
    expect(a.provider.views()).toEqual([expect.objectContaining({ state: 'held', heldUntil: heldUntil!.getTime() })]);

    // The same replica continues the live connection.
    const again = await a.provider.acquire(request(conversation), { wait: false });
    expect(again.continuing).toBe(true);
    expect(again.runner).toBe(first.runner);
    const slid = await a.provider.release(again, { hold: { idleTtlSeconds: 300, maxConcurrentWarm: 5 } });
    await eventually(cluster, () => sandboxesOf(conversation)[0]?.spec.shutdownTime === slid.heldUntil!.toISOString());

    // Another replica finds the same Sandbox (no second one) and resumes there.
    const elsewhere = await b.provider.acquire(request(conversation), { wait: false });
    expect(elsewhere.continuing).toBe(false);
    expect(elsewhere.runner.id).toBe(first.runner.id);
    expect(sandboxesOf(conversation)).toHaveLength(1);
    await b.provider.release(elsewhere, {});
    await sandboxGone(conversation);
    // The holding replica sees its Sandbox go and shows the conversation cold.
    await a.states.until((s) => !s.warm);
    expect(a.provider.views()).toEqual([]);
  });

  it('a hold whose deadline lapses ends: the Sandbox is deleted and the conversation shown cold', async () => {
    let now = Date.now();
    const { provider, states } = await replica(() => now);
    const conversation = conversationId();
    const lease = await provider.acquire(request(conversation), { wait: false });
    await provider.release(lease, { hold: { idleTtlSeconds: 60, maxConcurrentWarm: 5 } });
    now += 61_000;
    await provider.expireLapsedHolds();
    await sandboxGone(conversation);
    await states.until((s) => !s.warm);
    expect(states.changes.map((s) => s.warm)).toEqual([true, false]);
  });

  it('a hold ends when the controller releases the Sandbox for the tenant’s warm cap', async () => {
    const { provider, states } = await replica();
    const tenant = 'tnt_K8SWARMCAP';
    const [older, newer] = [conversationId(), conversationId()];
    const olderLease = await provider.acquire({ ...request(older), tenantId: tenant }, { wait: false });
    await provider.release(olderLease, { hold: { idleTtlSeconds: 600, maxConcurrentWarm: 1 } });
    const newerLease = await provider.acquire({ ...request(newer), tenantId: tenant }, { wait: false });
    await provider.release(newerLease, { hold: { idleTtlSeconds: 600, maxConcurrentWarm: 1 } });
    await sandboxGone(older);
    await states.until((s) => s.conversation === older && !s.warm);
    expect(sandboxesOf(newer)[0]?.status?.phase).toBe('Ready');
    await provider.discardConversation(newer);
    await sandboxGone(newer);
  });
});

describe('KubernetesSandboxProvider at the cluster’s capacity', () => {
  it('refuses at once with wait=false (the Sandbox not admitted is deleted), queues with wait=true until a place frees', async () => {
    const { provider } = await replica();
    const [one, two, three] = [conversationId(), conversationId(), conversationId()];
    const first = await provider.acquire(request(one), { wait: false });
    const second = await provider.acquire(request(two), { wait: false });

    const refused = await provider.acquire(request(three), { wait: false }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CapacityExhausted);
    expect((refused as CapacityExhausted).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await sandboxGone(three);

    const announced: Array<[number, number]> = [];
    const waiting = provider.acquire(request(three), { wait: true, onQueued: (position, hint) => announced.push([position, hint]) });
    await eventually(cluster, () => announced.length > 0);
    expect(announced).toEqual([[1, 5]]);
    expect(provider.queuedRuns()).toBe(1);
    await provider.release(first, {});
    const served = await waiting;
    expect(provider.queuedRuns()).toBe(0);
    expect(sandboxesOf(three)[0]?.status?.phase).toBe('Ready');
    await provider.release(second, {});
    await provider.release(served, {});
    await Promise.all([sandboxGone(one), sandboxGone(two), sandboxGone(three)]);
  });

  it('admit answers once the Sandbox has its place, before its runner is connected; at capacity it refuses as acquire does', async () => {
    let openGate: () => void = () => {};
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const connecting: string[] = [];
    const { provider } = await replica(undefined, async (endpoint) => {
      connecting.push(endpoint.id);
      await gate;
      return greetingConnector(endpoint);
    });
    const [one, two, three] = [conversationId(), conversationId(), conversationId()];
    const admitted = await provider.admit(request(one), { wait: false });
    expect(sandboxesOf(one)[0]?.status?.conditions).toContainEqual(expect.objectContaining({ type: 'Admitted', status: 'True' }));
    let leased: Lease | undefined;
    void admitted.lease.then((lease) => (leased = lease));
    await eventually(cluster, () => connecting.length === 1);
    expect(leased).toBeUndefined();
    openGate();
    const first = await admitted.lease;
    expect(first.runner.id).toBe(sandboxesOf(one)[0]?.status?.podName);

    const second = await provider.acquire(request(two), { wait: false });
    const refused = await provider.admit(request(three), { wait: false }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CapacityExhausted);
    await sandboxGone(three);
    await provider.release(first, {});
    await provider.release(second, {});
    await Promise.all([sandboxGone(one), sandboxGone(two)]);
  });

  it('a held turn past the hold limit is refused and its Sandbox leaves the line', async () => {
    const { provider } = await replica();
    const [one, two, three] = [conversationId(), conversationId(), conversationId()];
    const leases = [await provider.acquire(request(one), { wait: false }), await provider.acquire(request(two), { wait: false })];
    const limit = new AbortController();
    const waiting = provider.acquire(request(three), { wait: true, signal: limit.signal, onQueued: () => limit.abort() });
    await expect(waiting).rejects.toBeInstanceOf(CapacityExhausted);
    await sandboxGone(three);
    expect(provider.queuedRuns()).toBe(0);
    for (const lease of leases) await provider.release(lease, {});
    await Promise.all([sandboxGone(one), sandboxGone(two)]);
  });
});

describe('KubernetesSandboxProvider when a pod dies', () => {
  it('a pod killed mid-turn ends the turn crashed; the next acquire gets a new Sandbox', async () => {
    const { provider } = await replica();
    const conversation = conversationId();
    const lease = await provider.acquire(request(conversation), { wait: false });
    const turn = lease.runner.runTurn({ content: 'hello' }, () => {});
    const [sandbox] = sandboxesOf(conversation);
    await cluster.kubelet.kill(NAMESPACE, sandbox!.status!.podName!, { signal: 'SIGKILL' });
    expect(await turn).toMatchObject({ kind: 'crashed' });
    await provider.release(lease, { broken: true });
    await sandboxGone(conversation);

    const next = await provider.acquire(request(conversation), { wait: false });
    expect(sandboxesOf(conversation)[0]!.metadata.uid).not.toBe(sandbox!.metadata.uid);
    expect(next.runner).not.toBe(lease.runner);
    await provider.release(next, {});
    await sandboxGone(conversation);
  });

  it('a held runner whose pod dies is dropped and its conversation shown cold', async () => {
    const { provider, states } = await replica();
    const conversation = conversationId();
    const lease = await provider.acquire(request(conversation), { wait: false });
    await provider.release(lease, { hold: { idleTtlSeconds: 600, maxConcurrentWarm: 5 } });
    const [sandbox] = sandboxesOf(conversation);
    await cluster.kubelet.kill(NAMESPACE, sandbox!.status!.podName!, { signal: 'SIGKILL' });
    await sandboxGone(conversation);
    await states.until((s) => !s.warm);
    expect(provider.views()).toEqual([]);
  });
});

describe('KubernetesSandboxProvider with egress records (shared by the replicas)', () => {
  let databaseUrl: string;
  let database: DatabaseHandle;
  let records: RunnerRecords;
  const bindings = () => database.db.selectFrom('runner_egress').select(['runner_id', 'run_id']).execute();

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    database = await openDatabase({ databaseUrl, dataDir: '', poolSize: 2 });
    await migrateToLatest(database.db);
    records = databaseRunnerRecords(database.db, 'node-test', () => new Date());
  });
  afterAll(async () => {
    await database?.close();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  it('binds the run’s egress credential beside the connection, keeps it through the run’s turn and clears it after', async () => {
    const { provider } = await replica(undefined, greetingConnector, records);
    const conversation = conversationId();
    const lease = await provider.acquire({ ...request(conversation), runId: 'msg_AHEAD' }, { wait: false });
    // In place once the lease is given, before any turn: the turn's first request may reach another replica's proxy.
    expect(await bindings()).toEqual([{ runner_id: lease.runner.id, run_id: 'msg_AHEAD' }]);
    const turn = lease.runner.runTurn({ content: 'hello', runId: 'msg_AHEAD' }, () => {});
    expect(await bindings()).toEqual([{ runner_id: lease.runner.id, run_id: 'msg_AHEAD' }]);
    await lease.runner.kill();
    expect(await turn).toMatchObject({ kind: 'crashed' });
    expect(await bindings()).toEqual([]);
    await provider.release(lease, { broken: true });
    await sandboxGone(conversation);
  });

  it('a binding no turn used goes with the runner; a failed connection leaves none', async () => {
    const { provider } = await replica(undefined, greetingConnector, records);
    const conversation = conversationId();
    const lease = await provider.acquire({ ...request(conversation), runId: 'msg_UNUSED' }, { wait: false });
    expect(await bindings()).toEqual([{ runner_id: lease.runner.id, run_id: 'msg_UNUSED' }]);
    await provider.release(lease, {});
    expect(await bindings()).toEqual([]);
    await sandboxGone(conversation);

    const refused: RunnerConnector = async () => {
      throw new Error('refused by the runner');
    };
    const failing = await replica(undefined, refused, records);
    const other = conversationId();
    await expect(failing.provider.acquire({ ...request(other), runId: 'msg_REFUSED' }, { wait: false })).rejects.toThrow(
      'refused by the runner',
    );
    expect(await bindings()).toEqual([]);
    await sandboxGone(other);
  });
});
