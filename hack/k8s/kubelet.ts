/**
 * A simulated kubelet (with the scheduler's one decision folded in) for one node: it binds
 * unscheduled pods that fit its allocatable resources (others stay Pending with PodScheduled=False,
 * reason Unschedulable), starts one real process per container of its pods (in bubblewrap unless
 * told otherwise, in its own network namespace or loopback IP), and reports what a kubelet reports: phase, the
 * PodScheduled/Initialized/ContainersReady/Ready conditions, containerStatuses with waiting
 * (ContainerCreating, ErrImagePull, ImagePullBackOff, CreateContainerConfigError, CrashLoopBackOff),
 * running and terminated states, restart counts and readiness from readinessProbe. restartPolicy
 * decides what an exit means. A deleted pod's containers run their preStop hooks, then get SIGTERM,
 * then SIGKILL when the grace period is spent (kubelet-lifecycle.ts), and the pod object is removed
 * once they are gone.
 *
 * Not simulated: init containers, liveness and startup probes, volumes other than emptyDir,
 * secret and configMap, node pressure and eviction (image pull and start times only with realistic
 * timings, kubelet-timings.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeStatusError } from './errors.js';
import {
  ContainerConfigError,
  containerCommand,
  containerEnv,
  runProbe,
  startProcess,
  type ContainerSpec,
  type KubeletImage,
} from './kubelet-container.js';
import { eventRecorder, type PodRef } from './kubelet-events.js';
import { allocatePodIP, podNetwork } from './kubelet-pod-network.js';
import { acquirePodNetwork, POD_ADDRESSES, probeNetworkMode, type NetworkMode, type PodAttachment } from './pod-netns.js';
import { startPodNetworkSync } from './pod-network-sync.js';
import { preStopOf, runPreStop, stopWindowMs } from './kubelet-lifecycle.js';
import { kubeletTimings, type KubeletTimingsMode } from './kubelet-timings.js';
import { descendants, killTree, signal, terminateTree } from './kubelet-processes.js';
import { mountsFor, prepareVolumes, VolumeNotReady, type VolumeMount } from './kubelet-volumes.js';
import { timestamp } from './objects.js';
import { parseQuantity } from '../../kube/quantity.js';
import { isTerminal, missingResources, podResources, unschedulableMessage, usage } from './kubelet-scheduling.js';
import type { KubeTestServer } from './server.js';
import type { KubeObject, StoreChange } from './store.js';

export type { KubeletImage };

export interface KubeletOptions {
  server: KubeTestServer;
  /** Default `node-1`. */
  nodeName?: string;
  /** What each image runs; a pod naming another image fails with ErrImagePull. */
  images: Record<string, KubeletImage>;
  /** How often readiness probes run (instead of their periodSeconds). Default 100 ms. */
  probePeriodMs?: number;
  /**
   * `fast` (default): no pull or start time, probes every probePeriodMs. `realistic`: the kubelet's
   * probe defaults and seeded image pull and start times (kubelet-timings.ts), for benches.
   */
  timings?: KubeletTimingsMode;
  /** The seed of realistic timings' draws. Default 1. */
  timingSeed?: number;
  /** The first restart delay of a crashing container, doubled per restart up to 32 times it. Default 100 ms. */
  restartBackoffMs?: number;
  /** What pods may request in total on this node. Default 8 cpu, 16Gi memory, 110 pods. */
  allocatable?: { cpu?: string; memory?: string; pods?: number };
  /** `bwrap` (default): each container in bubblewrap like the local provider; `none`: a plain child process. */
  isolation?: 'bwrap' | 'none';
  /**
   * `netns`: each pod in a network namespace of its own on a bridge, Services and NetworkPolicies in
   * nftables (pod-netns.ts); `loopback`: pods share the host's network on loopback IPs. Default
   * `auto` (or the KUBELET_TEST_NETWORK environment variable): netns where the machine allows it.
   */
  network?: 'auto' | NetworkMode;
}

export interface KubeletProcess {
  namespace: string;
  pod: string;
  container: string;
  pid: number;
  podIP: string;
}

export interface Kubelet {
  nodeName: string;
  /** The pod network mode that ran. */
  networkMode: NetworkMode;
  /** The node's address as pods see it (127.0.0.1 in loopback mode): the host's processes are reached there. */
  nodeAddress: string;
  /** Resolves once every pod's Service and NetworkPolicy rules reflect the store as it is now (netns mode). */
  networkSynced(): Promise<void>;
  /** The processes running now, one per running container. */
  processes(): KubeletProcess[];
  /** What a pod's container (the first unless named) wrote to stdout and stderr. */
  logs(namespace: string, name: string, container?: string): string;
  /**
   * Signals a running container's program (the first container unless named), as a crash or an OOM
   * kill would: SIGKILL (the default) takes down its whole sandbox, so the exit is seen at once.
   * Killing a `processes()` pid directly would only kill bubblewrap and orphan the program.
   */
  kill(namespace: string, name: string, options?: { container?: string; signal?: NodeJS.Signals }): Promise<void>;
  close(): Promise<void>;
}

/** Annotation asking the kubelet to put the first containerPort in this environment variable. */
export const PORT_ENV_ANNOTATION = 'kubelet.test.acis.dev/port-env';

const LOG_LIMIT = 1 << 20;

type ContainerState =
  | { waiting: { reason: string; message?: string } }
  | { running: { startedAt: string } }
  | { terminated: { exitCode: number; signal?: number; reason: string; message?: string; startedAt?: string; finishedAt: string } };

interface ContainerRuntime {
  spec: ContainerSpec;
  state: ContainerState;
  lastState?: ContainerState;
  restartCount: number;
  ready: boolean;
  /** Exited and will not be restarted. */
  done: boolean;
  process?: ChildProcess;
  env: Record<string, string>;
  log: string;
  timer?: NodeJS.Timeout;
  probeFailures: number;
  exited?: Promise<void>;
  /** The host file bound at the container's terminationMessagePath. */
  terminationLog?: string;
  /** Its image pull and runtime start (realistic timings) are behind it; how long the pull took. */
  prepared?: { pullMs: number };
}

interface PodRuntime {
  namespace: string;
  name: string;
  uid: string;
  podIP: string;
  /** The pod's network namespace (netns mode). */
  network?: PodAttachment;
  startTime: string;
  restartPolicy: string;
  directory: string;
  containers: ContainerRuntime[];
  terminating: boolean;
  everRan: boolean;
  statusQueued: boolean;
  killTimer?: NodeJS.Timeout;
}

export async function startKubelet(options: KubeletOptions): Promise<Kubelet> {
  const { server } = options;
  const objects = server.store;
  const nodeName = options.nodeName ?? 'node-1';
  const probePeriodMs = options.probePeriodMs ?? 100;
  const restartBackoffMs = options.restartBackoffMs ?? 100;
  const timings = kubeletTimings(options.timings ?? 'fast', probePeriodMs, options.timingSeed);
  const isolation = options.isolation ?? 'bwrap';
  const allocatable = {
    cpu: parseQuantity(options.allocatable?.cpu ?? '8'),
    memory: parseQuantity(options.allocatable?.memory ?? '16Gi'),
    pods: options.allocatable?.pods ?? 110,
  };
  const networkMode = await chooseNetworkMode(options.network ?? (process.env.KUBELET_TEST_NETWORK as NetworkMode | undefined) ?? 'auto');
  // A node's pod capacity must fit its pod CIDR, as a kubelet's --max-pods must fit the node's
  // podCIDR (https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/): past it,
  // pods would be scheduled that can never get an address.
  if (networkMode === 'netns' && allocatable.pods > POD_ADDRESSES)
    throw new Error(
      `allocatable pods ${allocatable.pods} exceed the ${POD_ADDRESSES} addresses of the netns pod network's /24; run loopback or allow fewer pods`,
    );
  const podHost = networkMode === 'netns' ? await acquirePodNetwork() : undefined;
  const nodeAddress = podHost?.nodeAddress ?? '127.0.0.1';
  const networkSync =
    podHost &&
    startPodNetworkSync(objects, podHost, (error) => console.error(`kubelet ${options.nodeName ?? 'node-1'}: pod network:`, error));
  const baseDirectory = await mkdtemp(path.join(tmpdir(), `acis-kubelet-${nodeName}-`));
  /** Pods this kubelet runs, by uid. */
  const pods = new Map<string, PodRuntime>();
  const unschedulable = new Set<string>();
  let closed = false;

  const nodeStatus = {
    capacity: { cpu: options.allocatable?.cpu ?? '8', memory: options.allocatable?.memory ?? '16Gi', pods: String(allocatable.pods) },
    allocatable: { cpu: options.allocatable?.cpu ?? '8', memory: options.allocatable?.memory ?? '16Gi', pods: String(allocatable.pods) },
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'KubeletReady',
        message: 'kubelet is posting ready status',
        lastHeartbeatTime: timestamp(),
        lastTransitionTime: timestamp(),
      },
    ],
    addresses: [
      { type: 'InternalIP', address: nodeAddress },
      { type: 'Hostname', address: nodeName },
    ],
    nodeInfo: {
      kubeletVersion: 'v1.35.0-acis-test',
      operatingSystem: 'linux',
      architecture: 'amd64',
      containerRuntimeVersion: isolation === 'bwrap' ? 'bwrap://' : 'process://',
    },
  };
  const node =
    objects.find('nodes', undefined, nodeName) ??
    objects.create('nodes', undefined, {
      metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': 'linux' } },
    });
  objects.update('nodes', undefined, nodeName, { ...node, status: nodeStatus }, { subresource: 'status' });

  const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;
  const record = eventRecorder(objects, nodeName);
  const refOf = (pod: KubeObject): PodRef => ({ namespace: pod.metadata.namespace!, name: pod.metadata.name!, uid: pod.metadata.uid! });
  const fieldPath = (container: ContainerRuntime) => `spec.containers{${container.spec.name}}`;
  /** The newest runtime of a pod name (an older pod of the same name may still be stopping). */
  const runtimeByName = (namespace: string, name: string) =>
    [...pods.values()].reverse().find((runtime) => runtime.namespace === namespace && runtime.name === name);

  // ---- scheduling ----
  const schedule = (seen: KubeObject) => {
    const key = keyOf(seen.metadata.namespace!, seen.metadata.name!);
    // Another node may have bound it since this change was seen.
    const pod = objects.find('pods', seen.metadata.namespace, seen.metadata.name!);
    if (!pod || pod.metadata.uid !== seen.metadata.uid || (pod.spec as { nodeName?: string }).nodeName || pod.metadata.deletionTimestamp) {
      unschedulable.delete(key);
      return;
    }
    const lacking = missingResources(allocatable, usage(objects.store.scan('/pods'), nodeName), podResources(pod));
    if (lacking.length === 0) {
      unschedulable.delete(key);
      try {
        objects.bind(pod.metadata.namespace!, pod.metadata.name!, nodeName);
        record(refOf(pod), 'Normal', 'Scheduled', `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${nodeName}`, {
          component: 'default-scheduler',
        });
      } catch (error) {
        // Another node bound it first, or it is gone.
        if (!(error instanceof KubeStatusError)) throw error;
      }
      return;
    }
    if (!unschedulable.has(key))
      record(refOf(pod), 'Warning', 'FailedScheduling', unschedulableMessage(lacking), { component: 'default-scheduler' });
    unschedulable.add(key);
    writeStatus(pod.metadata.namespace!, pod.metadata.name!, pod.metadata.uid!, (status) => ({
      ...status,
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: unschedulableMessage(lacking) }],
    }));
  };

  const retryUnschedulable = () => {
    for (const key of [...unschedulable]) {
      const [namespace, name] = key.split('/') as [string, string];
      const pod = objects.find('pods', namespace, name);
      if (!pod || (pod.spec as { nodeName?: string }).nodeName || pod.metadata.deletionTimestamp) unschedulable.delete(key);
      else schedule(pod);
    }
  };

  // ---- status ----
  /** Rewrites the status of the pod with this uid (not a newer pod of the same name), only when it changed. */
  function writeStatus(
    namespace: string,
    name: string,
    uid: string,
    build: (status: Record<string, unknown>) => Record<string, unknown>,
  ): void {
    if (closed) return;
    const current = objects.find('pods', namespace, name);
    if (!current || current.metadata.uid !== uid) return;
    const previous = (current.status ?? {}) as Record<string, unknown>;
    const next = build(structuredClone(previous));
    const previousConditions = (previous.conditions ?? []) as Array<{ type: string; status: string; lastTransitionTime?: string }>;
    next.conditions = ((next.conditions ?? []) as Array<{ type: string; status: string; lastTransitionTime?: string }>).map((condition) => {
      const before = previousConditions.find((candidate) => candidate.type === condition.type);
      return {
        ...condition,
        lastProbeTime: null,
        lastTransitionTime: before && before.status === condition.status ? before.lastTransitionTime : timestamp(),
      };
    });
    if (JSON.stringify(next) === JSON.stringify(previous)) return;
    try {
      objects.update('pods', namespace, name, { ...current, status: next }, { subresource: 'status' });
    } catch (error) {
      if (!(error instanceof KubeStatusError)) throw error;
    }
  }

  const phaseOf = (runtime: PodRuntime): string => {
    if (runtime.containers.every((container) => container.done)) {
      return runtime.containers.every((container) => 'terminated' in container.state && container.state.terminated.exitCode === 0)
        ? 'Succeeded'
        : 'Failed';
    }
    return runtime.everRan ? 'Running' : 'Pending';
  };

  const flushStatus = (runtime: PodRuntime) => {
    runtime.statusQueued = false;
    const phase = phaseOf(runtime);
    const containersReady = runtime.containers.every((container) => container.ready);
    const notReady = runtime.containers.filter((container) => !container.ready).map((container) => container.spec.name);
    const notReadyMessage = `containers with unready status: [${notReady.join(' ')}]`;
    const completed = phase === 'Succeeded' || phase === 'Failed';
    const readyCondition = (type: string) =>
      containersReady
        ? { type, status: 'True' }
        : {
            type,
            status: 'False',
            reason: completed ? 'PodCompleted' : 'ContainersNotReady',
            message: completed ? undefined : notReadyMessage,
          };
    writeStatus(runtime.namespace, runtime.name, runtime.uid, (status) => ({
      ...status,
      phase,
      conditions: [
        {
          type: 'PodReadyToStartContainers',
          status: runtime.containers.some((container) => container.process) || runtime.everRan ? 'True' : 'False',
        },
        { type: 'Initialized', status: 'True' },
        readyCondition('Ready'),
        readyCondition('ContainersReady'),
        { type: 'PodScheduled', status: 'True' },
      ].map((condition) => Object.fromEntries(Object.entries(condition).filter(([, value]) => value !== undefined))),
      hostIP: nodeAddress,
      hostIPs: [{ ip: nodeAddress }],
      podIP: runtime.podIP,
      podIPs: [{ ip: runtime.podIP }],
      startTime: runtime.startTime,
      qosClass: status.qosClass ?? 'BestEffort',
      containerStatuses: runtime.containers.map((container) => ({
        name: container.spec.name,
        image: container.spec.image,
        imageID: options.images[container.spec.image] ? `${container.spec.image}@sha256:${'0'.repeat(64)}` : '',
        containerID: container.process ? `process://${container.process.pid}` : undefined,
        state: container.state,
        lastState: container.lastState ?? {},
        ready: container.ready,
        restartCount: container.restartCount,
        started: 'running' in container.state,
      })),
    }));
  };

  const queueStatus = (runtime: PodRuntime) => {
    if (runtime.statusQueued) return;
    runtime.statusQueued = true;
    setImmediate(() => flushStatus(runtime));
  };

  // ---- containers ----
  const backoffFor = (container: ContainerRuntime) => Math.min(restartBackoffMs * 2 ** container.restartCount, restartBackoffMs * 32);

  const startContainer = (runtime: PodRuntime, container: ContainerRuntime) => {
    if (runtime.terminating || closed) return;
    const pod = objects.find('pods', runtime.namespace, runtime.name);
    if (!pod || pod.metadata.uid !== runtime.uid) return;
    const image = options.images[container.spec.image];
    if (!image) {
      const pulledBefore = 'waiting' in container.state && container.state.waiting.reason === 'ErrImagePull';
      container.state = pulledBefore
        ? { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${container.spec.image}"` } }
        : { waiting: { reason: 'ErrImagePull', message: `failed to pull and unpack image "${container.spec.image}": not found` } };
      record(
        runtime,
        pulledBefore ? 'Normal' : 'Warning',
        pulledBefore ? 'BackOff' : 'Failed',
        pulledBefore ? `Back-off pulling image "${container.spec.image}"` : `Failed to pull image "${container.spec.image}": not found`,
        { fieldPath: fieldPath(container) },
      );
      queueStatus(runtime);
      // The kubelet retries a failed pull after its back-off (ImagePullBackOff), so an image that appears later is pulled.
      container.timer = setTimeout(() => startContainer(runtime, container), pulledBefore ? restartBackoffMs * 4 : restartBackoffMs);
      return;
    }
    if (!container.prepared) {
      const pullPolicy = (container.spec as { imagePullPolicy?: string }).imagePullPolicy;
      const { pullMs, startMs } = timings.beforeStartMs(container.spec.image, pullPolicy);
      container.prepared = { pullMs };
      if (pullMs > 0) record(runtime, 'Normal', 'Pulling', `Pulling image "${container.spec.image}"`, { fieldPath: fieldPath(container) });
      if (pullMs + startMs > 0) {
        container.timer = setTimeout(() => startContainer(runtime, container), pullMs + startMs);
        return;
      }
    }
    try {
      const annotations = pod.metadata.annotations ?? {};
      container.env = containerEnv(objects, pod, container.spec, image, annotations[PORT_ENV_ANNOTATION]);
    } catch (error) {
      if (!(error instanceof ContainerConfigError)) throw error;
      container.state = { waiting: { reason: 'CreateContainerConfigError', message: error.message } };
      record(runtime, 'Warning', 'Failed', `Error: ${error.message}`, { fieldPath: fieldPath(container) });
      queueStatus(runtime);
      container.timer = setTimeout(() => startContainer(runtime, container), backoffFor(container));
      return;
    }
    const volumesDirectory = path.join(runtime.directory, 'volumes');
    try {
      prepareVolumes(objects, pod, volumesDirectory);
    } catch (error) {
      if (!(error instanceof VolumeNotReady)) throw error;
      container.state = { waiting: { reason: 'ContainerCreating', message: error.message } };
      record(runtime, 'Warning', 'FailedMount', error.message);
      queueStatus(runtime);
      container.timer = setTimeout(() => startContainer(runtime, container), backoffFor(container));
      return;
    }
    const spec = pod.spec as { securityContext?: { runAsUser?: number; runAsGroup?: number } };
    const mounts = mountsFor(pod, (container.spec as { volumeMounts?: VolumeMount[] }).volumeMounts ?? [], volumesDirectory);
    // The termination message: a file of the container's own (fresh for each start), read when it exits.
    if (isolation !== 'none') {
      container.terminationLog = path.join(runtime.directory, `termination-${container.spec.name}`);
      writeFileSync(container.terminationLog, '', { mode: 0o666 });
      mounts.push({
        source: container.terminationLog,
        target: container.spec.terminationMessagePath ?? '/dev/termination-log',
        readOnly: false,
      });
    }
    const security = { ...spec.securityContext, ...container.spec.securityContext };
    const network = runtime.network ? { env: {}, binds: [] } : podNetwork(runtime.podIP, isolation, container.env);
    const child = startProcess({
      netns: runtime.network?.netns,
      command: containerCommand(container.spec, image, container.env),
      env: { ...container.env, ...network.env },
      isolation,
      workspace: path.join(runtime.directory, 'workspace'),
      home: path.join(runtime.directory, 'home'),
      binds: [...(image.binds ?? []), ...network.binds],
      volumes: mounts,
      hostname: runtime.name.slice(0, 63),
      uid: security.runAsUser,
      gid: security.runAsGroup,
    });
    container.process = child;
    const startedAt = timestamp();
    container.state = { running: { startedAt } };
    const pulledIn = (container.prepared?.pullMs ?? 0) / 1000;
    record(
      runtime,
      'Normal',
      'Pulled',
      pulledIn > 0
        ? `Successfully pulled image "${container.spec.image}" in ${pulledIn}s (${pulledIn}s including waiting)`
        : `Container image "${container.spec.image}" already present on machine`,
      { fieldPath: fieldPath(container) },
    );
    container.prepared = { pullMs: 0 };
    record(runtime, 'Normal', 'Created', `Created container: ${container.spec.name}`, { fieldPath: fieldPath(container) });
    record(runtime, 'Normal', 'Started', `Started container ${container.spec.name}`, { fieldPath: fieldPath(container) });
    container.ready = !container.spec.readinessProbe;
    container.probeFailures = 0;
    runtime.everRan = true;
    const append = (chunk: Buffer) => {
      container.log = (container.log + chunk.toString('utf8')).slice(-LOG_LIMIT);
    };
    child.stdout?.on('data', append);
    child.stderr?.on('data', append);
    container.exited = new Promise((resolve) => {
      let startError: Error | undefined;
      child.once('error', (error) => (startError = error));
      child.once('close', (code, signalName) => {
        onExit(runtime, container, child, startedAt, code, signalName, startError);
        resolve();
      });
    });
    if (container.spec.readinessProbe)
      container.timer = setTimeout(() => probe(runtime, container, child), timings.firstProbeMs(container.spec.readinessProbe));
    queueStatus(runtime);
  };

  const probe = async (runtime: PodRuntime, container: ContainerRuntime, child: ChildProcess) => {
    if (container.process !== child || runtime.terminating || closed) return;
    const spec = container.spec.readinessProbe!;
    const ok = await runProbe(
      spec,
      container.spec,
      runtime.podIP,
      container.env,
      runtime.network?.netns,
      Math.max(probePeriodMs, (spec.timeoutSeconds ?? 1) * 1000),
    );
    if (container.process !== child || runtime.terminating || closed) return;
    container.probeFailures = ok ? 0 : container.probeFailures + 1;
    if (!ok) record(runtime, 'Warning', 'Unhealthy', 'Readiness probe failed', { fieldPath: fieldPath(container) });
    const ready = ok ? true : container.probeFailures >= (spec.failureThreshold ?? 3) ? false : container.ready;
    if (ready !== container.ready) {
      container.ready = ready;
      queueStatus(runtime);
    }
    container.timer = setTimeout(() => probe(runtime, container, child), timings.periodMs(spec));
  };

  const onExit = (
    runtime: PodRuntime,
    container: ContainerRuntime,
    child: ChildProcess,
    startedAt: string,
    code: number | null,
    signalName: NodeJS.Signals | null,
    startError: Error | undefined,
  ) => {
    if (container.process !== child) return;
    container.process = undefined;
    container.ready = false;
    clearTimeout(container.timer);
    const exitCode = startError ? 128 : (code ?? 128 + (signalName === 'SIGKILL' ? 9 : 15));
    const reason = startError ? 'StartError' : exitCode === 0 ? 'Completed' : 'Error';
    const message = startError?.message ?? terminationMessage(container, exitCode);
    const terminated: ContainerState = {
      terminated: { exitCode, reason, ...(message ? { message } : {}), startedAt, finishedAt: timestamp() },
    };
    container.state = terminated;
    if (runtime.terminating || closed) {
      container.done = true;
      queueStatus(runtime);
      return;
    }
    const policy = runtime.restartPolicy;
    const restart = policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
    if (!restart) {
      container.done = true;
      queueStatus(runtime);
      return;
    }
    const delay = backoffFor(container);
    container.lastState = terminated;
    record(
      runtime,
      'Warning',
      'BackOff',
      `Back-off restarting failed container ${container.spec.name} in pod ${runtime.name}_${runtime.namespace}(${runtime.uid})`,
      { fieldPath: fieldPath(container) },
    );
    container.state = {
      waiting: {
        reason: 'CrashLoopBackOff',
        message: `back-off ${Math.ceil(delay / 1000)}s restarting failed container=${container.spec.name} pod=${runtime.name}_${runtime.namespace}(${runtime.uid})`,
      },
    };
    queueStatus(runtime);
    container.timer = setTimeout(() => {
      container.restartCount++;
      startContainer(runtime, container);
    }, delay);
  };

  // ---- pod lifecycle ----
  const startPod = async (pod: KubeObject) => {
    const namespace = pod.metadata.namespace!;
    const name = pod.metadata.name!;
    const directory = path.join(baseDirectory, `${namespace}_${name}_${pod.metadata.uid}`);
    const runtime: PodRuntime = {
      namespace,
      name,
      uid: pod.metadata.uid!,
      podIP: podHost ? '' : allocatePodIP(),
      startTime: timestamp(),
      restartPolicy: (pod.spec as { restartPolicy?: string }).restartPolicy ?? 'Always',
      directory,
      terminating: false,
      everRan: false,
      statusQueued: false,
      containers: ((pod.spec as { containers: ContainerSpec[] }).containers ?? []).map((spec) => ({
        spec,
        state: { waiting: { reason: 'ContainerCreating' } },
        restartCount: 0,
        ready: false,
        done: false,
        env: {},
        log: '',
        probeFailures: 0,
      })),
    };
    pods.set(runtime.uid, runtime);
    await mkdir(path.join(directory, 'workspace'), { recursive: true });
    await mkdir(path.join(directory, 'home'), { recursive: true });
    if (podHost && networkSync) {
      runtime.network = await podHost.attach();
      runtime.podIP = runtime.network.ip;
      // Its rules (its policies, its Services) are in place before any of its programs runs.
      await networkSync.add(runtime.uid, runtime.network);
    }
    flushStatus(runtime);
    for (const container of runtime.containers) startContainer(runtime, container);
  };

  const removePod = async (runtime: PodRuntime) => {
    pods.delete(runtime.uid);
    clearTimeout(runtime.killTimer);
    if (runtime.network) {
      networkSync?.remove(runtime.uid);
      await podHost?.detach(runtime.network);
    }
    await rm(runtime.directory, { recursive: true, force: true });
  };

  /** A container's preStop hook, within the grace period; a failure is an Event, and the stop goes on. */
  const preStop = async (runtime: PodRuntime, container: ContainerRuntime, budgetMs: number) => {
    const handler = preStopOf(container.spec);
    if (!handler || budgetMs <= 0) return;
    const failure = await runPreStop(handler, container.spec, runtime.podIP, container.env, runtime.network?.netns, budgetMs);
    if (failure) record(runtime, 'Warning', 'FailedPreStopHook', failure, { fieldPath: fieldPath(container) });
  };

  /** kubelet-lifecycle.ts: preStop hooks, SIGTERM, then SIGKILL when the grace period is spent. */
  const terminatePod = async (runtime: PodRuntime, graceSeconds: number) => {
    runtime.terminating = true;
    for (const container of runtime.containers) clearTimeout(container.timer);
    const running = runtime.containers.filter((container) => container.process);
    for (const container of running)
      record(runtime, 'Normal', 'Killing', `Stopping container ${container.spec.name}`, { fieldPath: fieldPath(container) });
    const hooksStarted = Date.now();
    await Promise.all(running.map((container) => preStop(runtime, container, graceSeconds * 1000)));
    runtime.killTimer = setTimeout(
      () => {
        for (const container of runtime.containers) if (container.process?.pid) void killTree(container.process.pid);
      },
      stopWindowMs(graceSeconds, Date.now() - hooksStarted),
    );
    const pids = running
      .filter((container) => container.process?.exitCode === null && container.process.signalCode === null)
      .map((container) => container.process!.pid!);
    await Promise.all(pids.map((pid) => terminateTree(pid, isolation)));
    await Promise.all(running.map((container) => container.exited));
    clearTimeout(runtime.killTimer);
    await removePod(runtime);
    if (closed) return;
    try {
      objects.delete('pods', runtime.namespace, runtime.name, { gracePeriodSeconds: 0, preconditions: { uid: runtime.uid } });
    } catch (error) {
      if (!(error instanceof KubeStatusError)) throw error;
    }
  };

  const killNow = async (runtime: PodRuntime) => {
    runtime.terminating = true;
    for (const container of runtime.containers) {
      clearTimeout(container.timer);
      if (container.process?.pid) await killTree(container.process.pid);
    }
    await Promise.all(runtime.containers.map((container) => container.exited));
    await removePod(runtime);
  };

  const inBackground = (work: Promise<void>) =>
    void work.catch((error: unknown) => {
      if (!(error instanceof KubeStatusError)) console.error(`kubelet ${nodeName}:`, error);
    });

  const reconcile = async (change: StoreChange) => {
    if (closed || change.storageKey !== '/pods') return;
    const pod = change.object;
    const namespace = pod.metadata.namespace!;
    const name = pod.metadata.name!;
    const key = keyOf(namespace, name);
    const runtime = pods.get(pod.metadata.uid!);
    const spec = pod.spec as { nodeName?: string };
    if (change.type === 'DELETED') {
      unschedulable.delete(key);
      if (runtime && !runtime.terminating) inBackground(killNow(runtime));
      if (spec.nodeName === nodeName) retryUnschedulable();
      return;
    }
    if (!spec.nodeName) {
      if (!pod.metadata.deletionTimestamp) schedule(pod);
      return;
    }
    if (spec.nodeName !== nodeName) return;
    if (pod.metadata.deletionTimestamp) {
      if (runtime && !runtime.terminating) inBackground(terminatePod(runtime, pod.metadata.deletionGracePeriodSeconds ?? 30));
      else if (!runtime) objects.delete('pods', namespace, name, { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } });
      return;
    }
    if (isTerminal(pod)) {
      if (
        change.type === 'MODIFIED' &&
        (change.previous?.status as { phase?: string } | undefined)?.phase !== (pod.status as { phase?: string }).phase
      )
        retryUnschedulable();
      return;
    }
    if (!runtime) await startPod(pod);
  };

  let queue = Promise.resolve();
  const enqueue = (change: StoreChange) => {
    // One change at a time, in order, after the write that caused it has returned. A failure is a
    // bug of this simulation: shown, and the queue goes on.
    queue = queue
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => reconcile(change))
      .catch((error: unknown) => {
        if (!(error instanceof KubeStatusError)) console.error(`kubelet ${nodeName}:`, error);
      });
  };
  const unsubscribe = objects.store.subscribe((change) => {
    if (change.storageKey === '/pods') enqueue(change);
  });
  for (const pod of objects.list('pods').items) enqueue({ type: 'ADDED', storageKey: '/pods', revision: 0, object: pod });

  server.setPodLogProvider((namespace, name, containerName, tailLines) => {
    const runtime = runtimeByName(namespace, name);
    const container = runtime?.containers.find((candidate) => containerName === undefined || candidate.spec.name === containerName);
    if (!runtime || !container)
      throw new KubeStatusError(400, 'BadRequest', `container "${containerName ?? ''}" in pod "${name}" is not available`);
    if (tailLines === undefined) return container.log;
    return container.log
      .split('\n')
      .slice(-(tailLines + 1))
      .join('\n');
  });

  return {
    nodeName,
    networkMode,
    nodeAddress,
    networkSynced: () => networkSync?.settled() ?? Promise.resolve(),
    processes() {
      return [...pods.values()].flatMap((runtime) =>
        runtime.containers
          .filter((container) => container.process?.pid)
          .map((container) => ({
            namespace: runtime.namespace,
            pod: runtime.name,
            container: container.spec.name,
            pid: container.process!.pid!,
            podIP: runtime.podIP,
          })),
      );
    },
    logs(namespace, name, containerName) {
      const runtime = runtimeByName(namespace, name);
      return runtime?.containers.find((container) => containerName === undefined || container.spec.name === containerName)?.log ?? '';
    },
    async kill(namespace, name, { container: containerName, signal: signalName = 'SIGKILL' } = {}) {
      const runtime = runtimeByName(namespace, name);
      const pid = runtime?.containers.find((container) => containerName === undefined || container.spec.name === containerName)?.process
        ?.pid;
      if (pid === undefined) throw new Error(`no running container ${containerName ?? ''} in pod ${namespace}/${name}`);
      if (signalName === 'SIGKILL') return killTree(pid);
      const targets = isolation === 'bwrap' ? await descendants(pid) : [pid];
      for (const target of targets) signal(target, signalName);
    },
    async close() {
      closed = true;
      unsubscribe();
      server.setPodLogProvider(undefined);
      await queue.catch(() => {});
      await Promise.all([...pods.values()].map(killNow));
      networkSync?.stop();
      await podHost?.release();
      try {
        objects.delete('nodes', undefined, nodeName);
      } catch (error) {
        if (!(error instanceof KubeStatusError)) throw error;
      }
      await rm(baseDirectory, { recursive: true, force: true });
    },
  };
}

/** What the container left at its terminationMessagePath (at most 4096 bytes, as the kubelet keeps), or its last log lines when it failed silently and asked for them. */
function terminationMessage(container: ContainerRuntime, exitCode: number): string | undefined {
  let text = '';
  try {
    text = container.terminationLog ? readFileSync(container.terminationLog, 'utf8').slice(0, 4096) : '';
  } catch {
    text = '';
  }
  if (!text && exitCode !== 0 && container.spec.terminationMessagePolicy === 'FallbackToLogsOnError') {
    text = container.log.split('\n').slice(-80).join('\n').slice(-2048);
  }
  return text || undefined;
}

let announced = false;

/** The pod network mode: as asked, or netns where the machine allows it; said once per process. */
async function chooseNetworkMode(asked: 'auto' | NetworkMode): Promise<NetworkMode> {
  const available = asked === 'loopback' ? 'loopback' : await probeNetworkMode();
  if (asked === 'netns' && available !== 'netns')
    throw new Error('kubelet: network mode netns asked, but no network namespace can be made here');
  if (!announced) console.info(`kubelet: pod network mode ${available}${asked === 'auto' ? ' (detected)' : ''}`);
  announced = true;
  return available;
}
