/**
 * What the simulated kubelet does for one container: resolve its environment the way the kubelet
 * does (values with $(VAR) expansion, secretKeyRef, configMapKeyRef, fieldRef, envFrom), start its
 * process (in bubblewrap by default, in the pod's network namespace, or sharing the host network so it
 * listens on the pod's loopback IP in loopback mode), and run readiness probes (tcpSocket, httpGet, exec).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { bwrapCommand, nodeRuntimeDirs, type Bind } from '../../runner/bwrap.js';
import type { KubeObjects } from './objects.js';
import { fieldValue } from './selectors.js';
import type { KubeObject } from './store.js';

export interface KubeletImage {
  /** The image's entrypoint: the program, run unless the container sets `command`. */
  command: string;
  /** The image's default arguments (its CMD), unless the container sets `args`. */
  args?: string[];
  env?: Record<string, string>;
  /** Host paths the program needs, bound read-only inside the sandbox: at the same path, or where `target` says. */
  binds?: Array<string | Bind>;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}

export interface ContainerSpec {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: Array<{
    prefix?: string;
    configMapRef?: { name: string; optional?: boolean };
    secretRef?: { name: string; optional?: boolean };
  }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { runAsUser?: number; runAsGroup?: number };
  terminationMessagePath?: string;
  terminationMessagePolicy?: 'File' | 'FallbackToLogsOnError';
}

export interface Probe {
  tcpSocket?: { port: number | string; host?: string };
  httpGet?: { port: number | string; path?: string; host?: string };
  exec?: { command: string[] };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
  successThreshold?: number;
}

/** A failure to build the container's configuration, reported as the kubelet's CreateContainerConfigError. */
export class ContainerConfigError extends Error {}

function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\$/g, (match, name: string | undefined) =>
    name === undefined ? '$' : (env[name] ?? match),
  );
}

function readRef(
  objects: KubeObjects,
  kind: 'secrets' | 'configmaps',
  namespace: string,
  name: string,
  key: string | undefined,
  optional: boolean | undefined,
): Record<string, string> | string | undefined {
  const object = objects.find(kind, namespace, name);
  const what = kind === 'secrets' ? 'secret' : 'configmap';
  if (!object) {
    if (optional) return undefined;
    throw new ContainerConfigError(`${what} "${name}" not found`);
  }
  const data: Record<string, string> = {};
  for (const [entry, value] of Object.entries((object.data ?? {}) as Record<string, string>)) {
    data[entry] = kind === 'secrets' ? Buffer.from(value, 'base64').toString('utf8') : value;
  }
  if (kind === 'secrets')
    for (const [entry, value] of Object.entries((object.stringData ?? {}) as Record<string, string>)) data[entry] = value;
  if (key === undefined) return data;
  if (!(key in data)) {
    if (optional) return undefined;
    throw new ContainerConfigError(`couldn't find key ${key} in ${kind === 'secrets' ? 'Secret' : 'ConfigMap'} ${namespace}/${name}`);
  }
  return data[key];
}

export function containerEnv(
  objects: KubeObjects,
  pod: KubeObject,
  container: ContainerSpec,
  image: KubeletImage,
  portEnv: string | undefined,
): Record<string, string> {
  const namespace = pod.metadata.namespace!;
  const env: Record<string, string> = { ...image.env, HOSTNAME: pod.metadata.name! };
  for (const source of container.envFrom ?? []) {
    const ref = source.configMapRef ?? source.secretRef;
    if (!ref) continue;
    const data = readRef(objects, source.secretRef ? 'secrets' : 'configmaps', namespace, ref.name, undefined, ref.optional);
    for (const [name, value] of Object.entries((data ?? {}) as Record<string, string>)) env[`${source.prefix ?? ''}${name}`] = value;
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (!from) env[variable.name] = expand(variable.value ?? '', env);
    else if (from.secretKeyRef) {
      const value = readRef(objects, 'secrets', namespace, from.secretKeyRef.name, from.secretKeyRef.key, from.secretKeyRef.optional);
      if (typeof value === 'string') env[variable.name] = value;
    } else if (from.configMapKeyRef) {
      const value = readRef(
        objects,
        'configmaps',
        namespace,
        from.configMapKeyRef.name,
        from.configMapKeyRef.key,
        from.configMapKeyRef.optional,
      );
      if (typeof value === 'string') env[variable.name] = value;
    } else if (from.fieldRef) {
      const labelMatch = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(from.fieldRef.fieldPath);
      const value = labelMatch
        ? pod.metadata[labelMatch[1] as 'labels' | 'annotations']?.[labelMatch[2]!]
        : fieldValue(pod, from.fieldRef.fieldPath);
      env[variable.name] = value === undefined ? '' : String(value);
    }
  }
  const firstPort = container.ports?.[0]?.containerPort;
  if (portEnv && firstPort !== undefined) env[portEnv] = String(firstPort);
  return env;
}

export function containerCommand(container: ContainerSpec, image: KubeletImage, env: Record<string, string>): string[] {
  const command = container.command ?? [image.command];
  const args = container.command ? (container.args ?? []) : (container.args ?? image.args ?? []);
  return [...command, ...args].map((part) => expand(part, env));
}

export interface StartOptions {
  command: string[];
  env: Record<string, string>;
  isolation: 'bwrap' | 'none';
  workspace: string;
  home: string;
  binds: Array<string | Bind>;
  /** Host directories of the pod's volumes at their mount paths. */
  volumes: Array<Bind & { readOnly: boolean }>;
  hostname: string;
  uid?: number;
  gid?: number;
  /** The pod's network namespace (netns mode), entered before the sandbox starts; the host's network otherwise. */
  netns?: string;
}

/** The command entering a pod's network namespace first, when it has one. */
function inNetns(netns: string | undefined, command: string[]): string[] {
  return netns ? ['nsenter', `--net=${netns}`, '--', ...command] : command;
}

export function startProcess(options: StartOptions): ChildProcess {
  if (options.isolation === 'none') {
    const [command, ...args] = inNetns(options.netns, options.command);
    return spawn(command!, args, {
      cwd: options.workspace,
      env: { PATH: process.env.PATH, HOME: options.home, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
  }
  const runtimeDirs: Bind[] = [
    ...nodeRuntimeDirs(),
    ...options.binds.map((bind) => (typeof bind === 'string' ? { source: bind, target: bind } : bind)),
  ];
  const { args, env } = bwrapCommand({
    workspace: options.workspace,
    home: options.home,
    runtimeDirs,
    env: options.env,
    network: 'host',
    hostname: options.hostname,
    uid: options.uid,
    gid: options.gid,
    command: options.command,
  });
  // Volumes are bound after the workspace and before the root is frozen read-only.
  const volumeArgs = options.volumes.flatMap((volume) => [volume.readOnly ? '--ro-bind' : '--bind', volume.source, volume.target]);
  // The host paths standing in for the image's files stay visible under a volume mounted over one of
  // their parents (a checkout under /tmp with an emptyDir at /tmp), as an image's own files would be.
  const covered = (target: string) => options.volumes.some((volume) => target === volume.target || target.startsWith(`${volume.target}/`));
  const imageArgs = runtimeDirs.filter((bind) => covered(bind.target)).flatMap((bind) => ['--ro-bind', bind.source, bind.target]);
  args.splice(args.indexOf('--remount-ro'), 0, ...volumeArgs, ...imageArgs);
  // bwrap passes its own environment on to the container (nothing of it on the command line).
  // bwrap shares the network it starts in (network 'host'): the pod's namespace when it has one.
  const [command, ...wrapped] = inNetns(options.netns, ['bwrap', ...args]);
  return spawn(command!, wrapped, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
}

function resolvePort(port: number | string, container: ContainerSpec): number {
  if (typeof port === 'number') return port;
  const named = container.ports?.find((candidate) => candidate.name === port);
  return named?.containerPort ?? Number(port);
}

/** One probe attempt: true when the container answers as the probe requires. */
export async function runProbe(
  probe: Probe,
  container: ContainerSpec,
  podIP: string,
  env: Record<string, string>,
  netns: string | undefined,
  timeoutMs: number,
): Promise<boolean> {
  if (probe.tcpSocket) {
    const port = resolvePort(probe.tcpSocket.port, container);
    return new Promise((resolve) => {
      const socket = connect({ host: probe.tcpSocket!.host ?? podIP, port, timeout: timeoutMs });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
      socket.once('timeout', () => {
        socket.destroy();
        resolve(false);
      });
    });
  }
  if (probe.httpGet) {
    const port = resolvePort(probe.httpGet.port, container);
    try {
      const response = await fetch(`http://${probe.httpGet.host ?? podIP}:${port}${probe.httpGet.path ?? '/'}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      return response.status >= 200 && response.status < 400;
    } catch {
      return false;
    }
  }
  if (probe.exec) {
    if (probe.exec.command.length === 0) return false;
    const [command, ...args] = inNetns(netns, probe.exec.command);
    return new Promise((resolve) => {
      const child = spawn(command!, args, { env: { PATH: process.env.PATH, ...env }, stdio: 'ignore', timeout: timeoutMs });
      child.once('error', () => resolve(false));
      child.once('exit', (code) => resolve(code === 0));
    });
  }
  return true;
}
