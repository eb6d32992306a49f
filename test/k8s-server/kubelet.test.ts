import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';
import { kubectl } from '../helpers/kube-tools.js';
import { PORT_ENV_ANNOTATION, startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

/** Programs standing in for images: node one-liners. */
const WEB = `
const http = require('node:http');
process.on('SIGTERM', () => { console.log('stopping'); process.exit(0); });
http.createServer((request, response) => response.end(JSON.stringify({ greeting: process.env.GREETING, color: process.env.COLOR, pod: process.env.POD_NAME, seesRepo: require('node:fs').existsSync(process.env.REPO) })))
  .listen(Number(process.env.PORT), process.env.POD_IP, () => console.log('listening on ' + process.env.POD_IP));
`;
const EXIT = 'setTimeout(() => process.exit(Number(process.env.EXIT_CODE ?? 0)), 20)';
const STUBBORN = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); setInterval(() => {}, 1000); console.log('up')";

let server: KubeTestServer;
let kubelet: Kubelet;

/** A program kept in a file under the host's /tmp, as a checkout there would keep it. */
let scriptDir: string;

beforeAll(async () => {
  scriptDir = await mkdtemp(path.join(tmpdir(), 'acis-kubelet-image-'));
  await writeFile(path.join(scriptDir, 'main.cjs'), "console.log('from the image file')");
  server = await startKubeTestServer();
  kubelet = await startKubelet({
    server,
    images: {
      'example/web:1': { command: process.execPath, args: ['-e', WEB] },
      'example/exit:1': { command: process.execPath, args: ['-e', EXIT] },
      'example/stubborn:1': { command: process.execPath, args: ['-e', STUBBORN] },
      'example/script:1': { command: process.execPath, args: [path.join(scriptDir, 'main.cjs')], binds: [scriptDir] },
      'example/reporter:1': {
        command: process.execPath,
        args: [
          '-e',
          "require('fs').writeFileSync(process.env.TERMINATION_LOG ?? '/dev/termination-log', 'the outcome'); process.exit(Number(process.env.EXIT_CODE ?? 0))",
        ],
      },
    },
    probePeriodMs: 50,
    restartBackoffMs: 50,
    allocatable: { cpu: '2', memory: '1Gi' },
  });
});
afterAll(async () => {
  await kubelet?.close();
  await server?.close();
  await rm(scriptDir, { recursive: true, force: true });
});

type Condition = { type: string; status: string; reason?: string; message?: string };
type ContainerStatus = { ready: boolean; restartCount: number; state: Record<string, any>; lastState: Record<string, any> };

function status(pod: KubeObject | undefined): {
  phase?: string;
  podIP?: string;
  conditions?: Condition[];
  containerStatuses?: ContainerStatus[];
} {
  return (pod?.status ?? {}) as never;
}

function condition(pod: KubeObject | undefined, type: string): Condition | undefined {
  return status(pod).conditions?.find((candidate) => candidate.type === type);
}

function createPod(name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): KubeObject {
  return server.store.create('pods', 'default', { metadata: { name, ...metadata }, spec });
}

function waitForPod(name: string, predicate: (pod: KubeObject | undefined) => boolean, timeoutMs = 15_000) {
  return server.store.waitFor('pods', 'default', name, predicate, timeoutMs);
}

describe('startKubelet', () => {
  it('runs a pod to Ready in bubblewrap on its own loopback IP, with env from values, secrets, config maps and the downward API', async () => {
    server.store.create('secrets', 'default', {
      metadata: { name: 'greeting' },
      data: { text: Buffer.from('hello from a secret').toString('base64') },
    });
    server.store.create('configmaps', 'default', { metadata: { name: 'settings' }, data: { color: 'teal' } });
    createPod(
      'web',
      {
        containers: [
          {
            name: 'main',
            image: 'example/web:1',
            ports: [{ name: 'http', containerPort: 8080 }],
            readinessProbe: { httpGet: { port: 'http', path: '/' } },
            env: [
              { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              { name: 'GREETING', valueFrom: { secretKeyRef: { name: 'greeting', key: 'text' } } },
              { name: 'COLOR', valueFrom: { configMapKeyRef: { name: 'settings', key: 'color' } } },
              { name: 'REPO', value: ROOT },
            ],
          },
        ],
      },
      { annotations: { [PORT_ENV_ANNOTATION]: 'PORT' } },
    );
    const pending = server.store.get('pods', 'default', 'web');
    expect(status(pending).phase).toBe('Pending');
    const ready = await waitForPod('web', (pod) => condition(pod, 'Ready')?.status === 'True');
    expect(status(ready).phase).toBe('Running');
    expect((ready!.spec as { nodeName: string }).nodeName).toBe('node-1');
    expect(status(ready).containerStatuses![0]).toMatchObject({ ready: true, restartCount: 0, state: { running: {} } });
    expect(['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => condition(ready, type)?.status)).toEqual([
      'True',
      'True',
      'True',
      'True',
    ]);
    const podIP = status(ready).podIP!;
    // A loopback IP of this process's block, or (netns mode) one of the node's network.
    expect(podIP).toMatch(kubelet.networkMode === 'netns' ? /^10\.\d+\.\d+\.\d+$/ : /^127\.\d+\.\d+\.\d+$/);
    expect(podIP).not.toBe(kubelet.nodeAddress);
    expect(podIP).not.toBe('127.0.0.1');
    const answer = await (await fetch(`http://${podIP}:8080/`)).json();
    // The checkout is not bound into the sandbox.
    expect(answer).toEqual({ greeting: 'hello from a secret', color: 'teal', pod: 'web', seesRepo: false });
    expect(kubelet.processes()).toEqual(expect.arrayContaining([expect.objectContaining({ pod: 'web', container: 'main', podIP })]));
    const logs = await kubectl(['logs', 'web'], { kubeconfig: server.kubeconfigPath });
    expect(logs.stdout).toBe(`listening on ${podIP}\n`);
  });

  it('mounts secret and configMap volumes read-only and emptyDir volumes writable, waiting in ContainerCreating for a missing secret', async () => {
    const READER = `
const fs = require('node:fs');
fs.writeFileSync('/scratch/note', 'written');
let readOnly = false;
try { fs.writeFileSync('/etc/acis/token', 'x'); } catch { readOnly = true; }
console.log(JSON.stringify({ token: fs.readFileSync('/etc/acis/token', 'utf8'), mode: fs.readFileSync('/etc/settings/mode', 'utf8'), note: fs.readFileSync('/scratch/note', 'utf8'), readOnly }));
setInterval(() => {}, 1000);`;
    server.store.create('configmaps', 'default', { metadata: { name: 'files' }, data: { mode: 'strict', other: 'x' } });
    createPod('mounts', {
      volumes: [
        { name: 'token', secret: { secretName: 'runner-token' } },
        { name: 'settings', configMap: { name: 'files', items: [{ key: 'mode', path: 'mode' }] } },
        { name: 'scratch', emptyDir: {} },
      ],
      containers: [
        {
          name: 'main',
          image: 'example/stubborn:1',
          command: [process.execPath, '-e', READER],
          volumeMounts: [
            { name: 'token', mountPath: '/etc/acis' },
            { name: 'settings', mountPath: '/etc/settings' },
            { name: 'scratch', mountPath: '/scratch' },
          ],
        },
      ],
    });
    const waiting = await waitForPod('mounts', (pod) => status(pod).containerStatuses?.[0]?.state.waiting?.message !== undefined);
    expect(status(waiting).containerStatuses![0]!.state.waiting).toEqual({
      reason: 'ContainerCreating',
      message: 'MountVolume.SetUp failed for volume "token" : secret "runner-token" not found',
    });
    server.store.create('secrets', 'default', {
      metadata: { name: 'runner-token' },
      data: { token: Buffer.from('s3cret').toString('base64') },
    });
    await vi.waitFor(() => expect(kubelet.logs('default', 'mounts')).not.toBe(''), { timeout: 10_000 });
    expect(JSON.parse(kubelet.logs('default', 'mounts'))).toEqual({ token: 's3cret', mode: 'strict', note: 'written', readOnly: true });
    server.store.delete('pods', 'default', 'mounts', { gracePeriodSeconds: 0 });
  });

  it('stops a deleted pod with SIGTERM and removes it once the process is gone', async () => {
    const started = Date.now();
    server.store.delete('pods', 'default', 'web');
    expect(server.store.get('pods', 'default', 'web').metadata.deletionTimestamp).toBeDefined();
    await waitForPod('web', (pod) => pod === undefined);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(kubelet.processes().filter((process) => process.pod === 'web')).toEqual([]);
  });

  it("runs a pod recreated under the same name as a new pod, the old one's process gone", async () => {
    const first = createPod('reborn', { containers: [{ name: 'main', image: 'example/stubborn:1' }] });
    await waitForPod('reborn', (pod) => status(pod).phase === 'Running');
    server.store.delete('pods', 'default', 'reborn', { gracePeriodSeconds: 0 });
    const second = createPod('reborn', { containers: [{ name: 'main', image: 'example/stubborn:1' }] });
    const running = await waitForPod('reborn', (pod) => pod?.metadata.uid === second.metadata.uid && status(pod).phase === 'Running');
    expect(running!.metadata.uid).not.toBe(first.metadata.uid);
    await vi.waitFor(() => expect(kubelet.processes().filter((process) => process.pod === 'reborn')).toHaveLength(1));
    server.store.delete('pods', 'default', 'reborn', { gracePeriodSeconds: 0 });
  });

  it('kills a process that ignores SIGTERM when the grace period ends', async () => {
    createPod('stubborn', { terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image: 'example/stubborn:1' }] });
    await waitForPod('stubborn', (pod) => status(pod).phase === 'Running');
    // Only once its SIGTERM handler is installed.
    await vi.waitFor(() => expect(kubelet.logs('default', 'stubborn')).toBe('up\n'));
    const started = Date.now();
    server.store.delete('pods', 'default', 'stubborn');
    await waitForPod('stubborn', (pod) => pod === undefined);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(kubelet.processes().filter((process) => process.pod === 'stubborn')).toEqual([]);
  });

  it('reports a crashing container as CrashLoopBackOff under restartPolicy Always, restarting it', async () => {
    createPod('crashy', { containers: [{ name: 'main', image: 'example/exit:1', env: [{ name: 'EXIT_CODE', value: '3' }] }] });
    // From the fifth restart on the back-off is at its longest (1.6 s here), long enough to look with kubectl.
    const looping = await waitForPod(
      'crashy',
      (pod) =>
        (status(pod).containerStatuses?.[0]?.restartCount ?? 0) >= 5 &&
        status(pod).containerStatuses?.[0]?.state.waiting?.reason === 'CrashLoopBackOff',
    );
    const container = status(looping).containerStatuses![0]!;
    expect(status(looping).phase).toBe('Running');
    expect(container.lastState).toMatchObject({ terminated: { exitCode: 3, reason: 'Error' } });
    expect(condition(looping, 'Ready')).toMatchObject({ status: 'False', reason: 'ContainersNotReady' });
    const printed = await kubectl(['get', 'pod', 'crashy', '--no-headers'], { kubeconfig: server.kubeconfigPath });
    expect(printed.stdout).toMatch(/^crashy\s+0\/1\s+CrashLoopBackOff\s+\d+/);
    const described = await kubectl(['describe', 'pod', 'crashy'], { kubeconfig: server.kubeconfigPath });
    expect(described.stdout).toMatch(/Normal\s+Scheduled\s+\S+\s+default-scheduler\s+Successfully assigned default\/crashy to node-1/);
    expect(described.stdout).toMatch(
      /Warning\s+BackOff\s+\S+( \(x\d+ over \S+\))?\s+kubelet\s+spec\.containers\{main\}: Back-off restarting failed container main in pod crashy/,
    );
    server.store.delete('pods', 'default', 'crashy');
  });

  it('restarts a killed container under restartPolicy Always, with exit code 137', async () => {
    createPod('victim', { containers: [{ name: 'main', image: 'example/stubborn:1' }] });
    await waitForPod('victim', (pod) => status(pod).containerStatuses?.[0]?.state.running !== undefined);
    await kubelet.kill('default', 'victim');
    const restarted = await waitForPod(
      'victim',
      (pod) => status(pod).containerStatuses?.[0]?.restartCount === 1 && status(pod).containerStatuses?.[0]?.state.running !== undefined,
    );
    expect(status(restarted).containerStatuses![0]!.lastState).toMatchObject({ terminated: { exitCode: 137, reason: 'Error' } });
    server.store.delete('pods', 'default', 'victim', { gracePeriodSeconds: 0 });
  });

  it('fails a pod whose container exits non-zero under restartPolicy Never', async () => {
    createPod('once', {
      restartPolicy: 'Never',
      containers: [{ name: 'main', image: 'example/exit:1', env: [{ name: 'EXIT_CODE', value: '7' }] }],
    });
    const failed = await waitForPod('once', (pod) => status(pod).phase === 'Failed');
    expect(status(failed).containerStatuses![0]).toMatchObject({
      restartCount: 0,
      ready: false,
      state: { terminated: { exitCode: 7, reason: 'Error' } },
    });
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'PodCompleted' });
  });

  it("keeps an image's files visible under a volume mounted over their parent (an emptyDir at /tmp)", async () => {
    createPod('image-under-tmp', {
      restartPolicy: 'Never',
      containers: [{ name: 'main', image: 'example/script:1', volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }] }],
      volumes: [{ name: 'tmp', emptyDir: {} }],
    });
    const done = await waitForPod('image-under-tmp', (pod) => ['Succeeded', 'Failed'].includes(status(pod).phase ?? ''));
    expect(status(done).phase, kubelet.logs('default', 'image-under-tmp')).toBe('Succeeded');
    expect(kubelet.logs('default', 'image-under-tmp')).toContain('from the image file');
  });

  it("reports what a container wrote to its terminationMessagePath as the terminated state's message, or its last log lines when asked", async () => {
    createPod('reporter', { restartPolicy: 'Never', containers: [{ name: 'main', image: 'example/reporter:1' }] });
    const done = await waitForPod('reporter', (pod) => status(pod).phase === 'Succeeded');
    expect(status(done).containerStatuses![0]!.state.terminated).toMatchObject({ exitCode: 0, message: 'the outcome' });
    createPod('reporter-elsewhere', {
      restartPolicy: 'Never',
      containers: [
        {
          name: 'main',
          image: 'example/reporter:1',
          terminationMessagePath: '/tmp/outcome',
          env: [
            { name: 'TERMINATION_LOG', value: '/tmp/outcome' },
            { name: 'EXIT_CODE', value: '4' },
          ],
        },
      ],
    });
    const failed = await waitForPod('reporter-elsewhere', (pod) => status(pod).phase === 'Failed');
    expect(status(failed).containerStatuses![0]!.state.terminated).toMatchObject({ exitCode: 4, message: 'the outcome' });
    createPod('silent', {
      restartPolicy: 'Never',
      containers: [
        {
          name: 'main',
          image: 'example/exit:1',
          terminationMessagePolicy: 'FallbackToLogsOnError',
          env: [{ name: 'EXIT_CODE', value: '5' }],
        },
      ],
    });
    const silent = await waitForPod('silent', (pod) => status(pod).phase === 'Failed');
    expect(status(silent).containerStatuses![0]!.state.terminated.message).toBeUndefined();
  });

  it("runs a Job's pod (restartPolicy OnFailure) to completion, and the Job completes", async () => {
    server.store.create('jobs', 'default', {
      metadata: { name: 'sync' },
      spec: {
        template: {
          metadata: { labels: { app: 'sync' } },
          spec: { restartPolicy: 'OnFailure', containers: [{ name: 'main', image: 'example/exit:1' }] },
        },
      },
    });
    const job = await server.store.waitFor('jobs', 'default', 'sync', (object) =>
      ((object?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).some(
        (candidate) => candidate.type === 'Complete' && candidate.status === 'True',
      ),
    );
    expect(job!.status).toMatchObject({ succeeded: 1, active: 0, failed: 0 });
    const [pod] = server.store.list('pods', 'default', { labelSelector: 'batch.kubernetes.io/job-name=sync' }).items;
    expect(pod!.metadata.name).toMatch(/^sync-[a-z0-9]{5}$/);
    expect(status(pod)).toMatchObject({ phase: 'Succeeded' });
    expect(status(pod).containerStatuses![0]).toMatchObject({
      restartCount: 0,
      state: { terminated: { exitCode: 0, reason: 'Completed' } },
    });
  });

  it('fails a Job whose pods keep failing past its backoffLimit', async () => {
    server.store.create('jobs', 'default', {
      metadata: { name: 'doomed' },
      spec: {
        backoffLimit: 1,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [{ name: 'main', image: 'example/exit:1', env: [{ name: 'EXIT_CODE', value: '1' }] }],
          },
        },
      },
    });
    const job = await server.store.waitFor('jobs', 'default', 'doomed', (object) =>
      ((object?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).some((candidate) => candidate.type === 'Failed'),
    );
    expect(job!.status).toMatchObject({
      failed: 2,
      succeeded: 0,
      conditions: expect.arrayContaining([expect.objectContaining({ type: 'Failed', reason: 'BackoffLimitExceeded' })]),
    });
  });

  it('reports an unknown image as ErrImagePull, then ImagePullBackOff', async () => {
    createPod('missing-image', { containers: [{ name: 'main', image: 'example/nowhere:9' }] });
    const pulling = await waitForPod(
      'missing-image',
      (pod) => status(pod).containerStatuses?.[0]?.state.waiting?.reason === 'ErrImagePull',
    );
    expect(status(pulling).phase).toBe('Pending');
    const backingOff = await waitForPod(
      'missing-image',
      (pod) => status(pod).containerStatuses?.[0]?.state.waiting?.reason === 'ImagePullBackOff',
    );
    expect(status(backingOff).containerStatuses![0]!.state.waiting.message).toContain('example/nowhere:9');
  });

  it('reports a missing secret as CreateContainerConfigError and starts once it exists', async () => {
    createPod('needs-secret', {
      containers: [
        {
          name: 'main',
          image: 'example/stubborn:1',
          env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'later', key: 'token' } } }],
        },
      ],
    });
    const waiting = await waitForPod(
      'needs-secret',
      (pod) => status(pod).containerStatuses?.[0]?.state.waiting?.reason === 'CreateContainerConfigError',
    );
    expect(status(waiting).containerStatuses![0]!.state.waiting.message).toBe('secret "later" not found');
    server.store.create('secrets', 'default', { metadata: { name: 'later' }, stringData: { token: 't' } });
    await waitForPod('needs-secret', (pod) => status(pod).containerStatuses?.[0]?.state.running !== undefined);
    server.store.delete('pods', 'default', 'needs-secret', { gracePeriodSeconds: 0 });
  });

  it('leaves a pod that does not fit the node Pending as Unschedulable, and binds it once room frees', async () => {
    createPod('hog', { containers: [{ name: 'main', image: 'example/stubborn:1', resources: { requests: { cpu: '1500m' } } }] });
    await waitForPod('hog', (pod) => status(pod).phase === 'Running');
    createPod('second', {
      containers: [{ name: 'main', image: 'example/stubborn:1', resources: { requests: { cpu: '1', memory: '100Mi' } } }],
    });
    const unschedulable = await waitForPod('second', (pod) => condition(pod, 'PodScheduled')?.reason === 'Unschedulable');
    expect(condition(unschedulable, 'PodScheduled')).toMatchObject({
      status: 'False',
      message: expect.stringContaining('Insufficient cpu'),
    });
    expect((unschedulable!.spec as { nodeName?: string }).nodeName).toBeUndefined();
    const events = server.store.list('events', 'default', { fieldSelector: 'involvedObject.name=second,reason=FailedScheduling' }).items;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Warning', source: { component: 'default-scheduler' } });
    server.store.delete('pods', 'default', 'hog', { gracePeriodSeconds: 0 });
    const scheduled = await waitForPod('second', (pod) => status(pod).phase === 'Running');
    expect(condition(scheduled, 'PodScheduled')?.status).toBe('True');
  });

  it('shares pods between nodes: a pod that does not fit one kubelet runs on another', async () => {
    const second = await startKubelet({
      server,
      nodeName: 'node-2',
      images: { 'example/stubborn:1': { command: process.execPath, args: ['-e', STUBBORN] } },
      allocatable: { cpu: '4' },
    });
    try {
      createPod('wide', { containers: [{ name: 'main', image: 'example/stubborn:1', resources: { requests: { cpu: '3' } } }] });
      const running = await waitForPod('wide', (pod) => status(pod).phase === 'Running');
      expect((running!.spec as { nodeName: string }).nodeName).toBe('node-2');
      expect(condition(running, 'PodScheduled')?.status).toBe('True');
      expect(second.processes().map((process) => process.pod)).toEqual(['wide']);
    } finally {
      await second.close();
    }
  });
});
