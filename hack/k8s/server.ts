/**
 * The Kubernetes API test server: stands where a cluster's API server stands, for the controller,
 * client-node, kubectl and helm, over plain HTTP on loopback. See README.md beside this file for what
 * it implements and what it does not.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { ADMIN_TOKEN, Authenticator } from './authentication.js';
import { RbacAuthorizer } from './authorization.js';
import { GarbageCollector } from './garbage-collector.js';
import { JobController } from './job-controller.js';
import { createHandler, type FailureRule, type PodLogProvider, type RequestRecord, type ServedWatch } from './http.js';
import { KubeObjects } from './objects.js';
import { ALL_POD_ADMISSION, type PodAdmission } from './pod-admission.js';
import { createBootstrapPolicy } from './rbac-bootstrap.js';
import { ResourceRegistry } from './resources.js';
import { ObjectStore, type KubeObject } from './store.js';

export interface KubeTestServerOptions {
  /** Directories whose *.yaml/*.yml/*.json CustomResourceDefinitions are served from the start. */
  crdDirectories?: string[];
  /** Namespaces created at start, beside default, kube-system and kube-public. */
  namespaces?: string[];
  /** Changes kept for watches; a watch from before them gets 410 Gone. Default 10000. */
  historyLimit?: number;
  /** How often a watch that allows bookmarks gets one. Default 1000 ms. */
  bookmarkIntervalMs?: number;
  /**
   * Serve HTTPS, as every cluster's API does, with a certificate from a CA made for this server
   * (the kubeconfig trusts it). Default: plain HTTP, the kubeconfig skipping verification.
   */
  tls?: boolean;
  /**
   * Which of the real server's pod admission rules apply (pod-admission.ts): validation, LimitRange,
   * Pod Security. Default: all; a test turning one off says which rule of the real server it relaxes.
   */
  podAdmission?: Partial<PodAdmission>;
  /**
   * How long the garbage collector waits before acting on a change (a deleted owner's dependents,
   * foreground deletion, a namespace's contents). Default 0: the next tick. Longer shows the race
   * a real collector's latency opens: a dependent still there right after its owner went.
   */
  garbageCollectorDelayMs?: number;
}

export interface RequestFilter {
  method?: string;
  verb?: RequestRecord['verb'];
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** Matched against the path (and query) of the request. */
  path?: string | RegExp;
}

export interface KubeTestServer {
  url: string;
  /** A kubeconfig file (context `acis-test`, namespace default) for client-node, kubectl and helm: the administrator. */
  kubeconfigPath: string;
  /**
   * A kubeconfig file whose user is the ServiceAccount (which must exist), with a token the server
   * signed (valid `expirationSeconds`, default 3600), its namespace the context's, for the server's
   * HTTPS listener (started on first use when the server is plain HTTP: kubectl sends tokens over
   * TLS only). What it may do is what RBAC bound to the account allows.
   */
  kubeconfigFor(account: { namespace: string; serviceAccount: string; expirationSeconds?: number }): Promise<string>;
  /** The API's verbs in process, for arranging and inspecting state in tests. */
  store: KubeObjects;
  /** Every request so far (discovery included), in arrival order. */
  requests: RequestRecord[];
  countRequests(filter?: RequestFilter): number;
  /** Makes the next matching request fail (see FailureRule). */
  failNext(rule: FailureRule): void;
  /** Forgets the injected failures not used yet. */
  clearFailures(): void;
  /**
   * Ends open watches (of one resource, or all) from the server side: cleanly, as an API server
   * ending a watch does, or `abrupt`ly (the connection reset), as a crash or a network cut does.
   */
  closeWatches(options?: { resource?: string; abrupt?: boolean }): void;
  /** Forgets the watch history: watches from any earlier resourceVersion get 410 Gone. */
  compact(): void;
  /** Where `kubectl logs` reads from; the simulated kubelet installs itself here. */
  setPodLogProvider(provider: PodLogProvider | undefined): void;
  close(): Promise<void>;
}

const BASE_NAMESPACES = ['default', 'kube-system', 'kube-public'];

export async function loadManifests(directory: string): Promise<KubeObject[]> {
  const names = (await readdir(directory)).filter((name) => /\.(ya?ml|json)$/.test(name)).sort();
  const manifests: KubeObject[] = [];
  for (const name of names) {
    const text = await readFile(path.join(directory, name), 'utf8');
    for (const document of parseAllDocuments(text)) {
      const value = document.toJS() as KubeObject | null;
      if (value && typeof value === 'object') manifests.push(value);
    }
  }
  return manifests;
}

interface KubeconfigUser {
  name: string;
  token: string;
  namespace: string;
}

function kubeconfig(url: string, caPem: string | undefined, user: KubeconfigUser): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: acis-test',
    '  cluster:',
    `    server: ${url}`,
    caPem ? `    certificate-authority-data: ${Buffer.from(caPem).toString('base64')}` : '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${user.name}`,
    '  user:',
    `    token: ${user.token}`,
    'contexts:',
    '- name: acis-test',
    '  context:',
    '    cluster: acis-test',
    `    user: ${user.name}`,
    `    namespace: ${user.namespace}`,
    'current-context: acis-test',
    '',
  ].join('\n');
}

export async function startKubeTestServer(options: KubeTestServerOptions = {}): Promise<KubeTestServer> {
  const registry = new ResourceRegistry();
  const store = new ObjectStore(options.historyLimit ?? 10_000);
  const podLogs: { provider?: PodLogProvider } = {};
  const objects = new KubeObjects(registry, store, podLogs, { ...ALL_POD_ADMISSION, ...options.podAdmission });
  const collector = new GarbageCollector(objects, options.garbageCollectorDelayMs ?? 0);
  const jobs = new JobController(objects);
  const authenticator = new Authenticator(objects);
  const authorizer = new RbacAuthorizer(objects);
  createBootstrapPolicy(objects);
  for (const name of new Set([...BASE_NAMESPACES, ...(options.namespaces ?? [])])) {
    objects.create('namespaces', undefined, { metadata: { name } });
  }
  for (const directory of options.crdDirectories ?? []) {
    for (const manifest of await loadManifests(directory)) {
      if (manifest.kind === 'CustomResourceDefinition') objects.create('customresourcedefinitions', undefined, manifest);
    }
  }

  const watches = new Set<ServedWatch>();
  const requests: RequestRecord[] = [];
  const failures: FailureRule[] = [];
  const handler = createHandler({
    objects,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 1000,
    watches,
    requests,
    failures,
    podLogs,
    authenticator,
    authorizer,
  });
  const main = await listen(handler, options.tls);
  // The HTTPS listener ServiceAccount kubeconfigs name: the main one, or a second started on first use.
  let secure: Promise<Listener> | undefined = options.tls ? Promise.resolve(main) : undefined;
  const url = main.url;
  const directory = await mkdtemp(path.join(tmpdir(), 'acis-kube-'));
  const kubeconfigPath = path.join(directory, 'kubeconfig');
  await writeFile(kubeconfigPath, kubeconfig(url, main.caPem, { name: 'acis-test', token: ADMIN_TOKEN, namespace: 'default' }));
  let written = 0;

  const closeWatches = (which: { resource?: string; abrupt?: boolean } = {}) => {
    for (const watch of [...watches]) {
      if (which.resource !== undefined && watch.resource !== which.resource) continue;
      if (which.abrupt) watch.abort();
      else watch.stop();
    }
  };

  return {
    url,
    kubeconfigPath,
    async kubeconfigFor({ namespace, serviceAccount, expirationSeconds }) {
      const { token } = authenticator.issue({ namespace, name: serviceAccount }, expirationSeconds ?? 3600);
      secure ??= listen(handler, true);
      const listener = await secure;
      const file = path.join(directory, `${namespace}-${serviceAccount}-${++written}.kubeconfig`);
      await writeFile(file, kubeconfig(listener.url, listener.caPem, { name: serviceAccount, token, namespace }));
      return file;
    },
    store: objects,
    requests,
    countRequests(filter = {}) {
      return requests.filter(
        (request) =>
          (filter.method === undefined || request.method === filter.method) &&
          (filter.verb === undefined || request.verb === filter.verb) &&
          (filter.resource === undefined || request.resource === filter.resource) &&
          (filter.subresource === undefined || request.subresource === filter.subresource) &&
          (filter.namespace === undefined || request.namespace === filter.namespace) &&
          (filter.name === undefined || request.name === filter.name) &&
          (filter.path === undefined ||
            (typeof filter.path === 'string' ? request.path === filter.path : filter.path.test(request.path + request.query))),
      ).length;
    },
    failNext(rule) {
      failures.push(rule);
    },
    clearFailures() {
      failures.length = 0;
    },
    closeWatches,
    compact() {
      store.compact();
    },
    setPodLogProvider(provider) {
      podLogs.provider = provider;
    },
    async close() {
      collector.close();
      jobs.close();
      closeWatches();
      const listeners = new Set([main, ...(secure ? [await secure] : [])]);
      for (const listener of listeners) {
        listener.server.closeAllConnections();
        await new Promise<void>((resolve) => listener.server.close(() => resolve()));
      }
      await rm(directory, { recursive: true, force: true });
    },
  };
}

interface Listener {
  server: HttpServer;
  url: string;
  /** The CA its certificate is under (HTTPS only). */
  caPem?: string;
}

/** A listener on loopback serving `handler`: HTTPS under a CA made for it when `tls`, else plain HTTP. */
async function listen(handler: ReturnType<typeof createHandler>, tls: boolean | undefined): Promise<Listener> {
  const ca = tls ? await createEphemeralCa('ACIS Kubernetes API test server CA') : undefined;
  const leaf = await ca?.issueLeaf('127.0.0.1');
  const server = leaf ? createTlsServer({ cert: leaf.certPem, key: leaf.keyPem }, handler) : createServer(handler);
  closeWhenIdle(server, leaf ? 'secureConnection' : 'connection', API_IDLE_TIMEOUT_MS);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `${leaf ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`, caPem: ca?.certPem };
}

/** kube-apiserver's idle timeout for a kept connection (Go's net/http `IdleTimeout`, as it sets it). */
const API_IDLE_TIMEOUT_MS = 90_000;

/**
 * Closes a connection once no request has used it for `idleMs`, and says nothing of it in the
 * answers, as kube-apiserver does: Go's net/http sends no `Keep-Alive: timeout` header, so a client
 * keeps an idle connection as long as its own setting says (undici: 4 s unless told). Node's own
 * keep-alive timeout would announce itself in that header, so it is off and this does its work.
 */
function closeWhenIdle(server: HttpServer, connected: 'connection' | 'secureConnection', idleMs: number): void {
  server.keepAliveTimeout = 0;
  // By the socket requests arrive on (over TLS, the TLS socket, not the TCP one under it).
  const timers = new WeakMap<Socket, NodeJS.Timeout>();
  const arm = (socket: Socket) => {
    clearTimeout(timers.get(socket));
    timers.set(socket, setTimeout(() => socket.destroy(), idleMs).unref());
  };
  server.on(connected, arm);
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    clearTimeout(timers.get(request.socket));
    response.once('close', () => arm(request.socket));
  });
}
