/**
 * The REST surface: URL routing (/api/v1/..., /apis/<group>/<version>/..., namespaced and cluster
 * paths, the legacy /watch/ prefix, subresources), request bodies (JSON, or YAML for server-side
 * apply), content negotiation for tables, watch streams, and the failure injection of tests. One
 * error boundary turns thrown KubeStatusErrors into Status responses.
 *
 * Served over plain HTTP without authentication: kubectl sends no bearer token over http, and
 * client-node accepts http with `insecure-skip-tls-verify` in the kubeconfig.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { apiGroup, apiGroupList, apiResourceList, apiVersions, SERVER_VERSION } from './discovery.js';
import { badRequest, KubeStatusError, methodNotAllowed, notFound } from './errors.js';
import type { DeleteOptions, KubeObjects, WriteOptions } from './objects.js';
import { openApiGroupVersion, openApiRoot } from './openapi.js';
import { decodeDeleteOptions, decodeProtobuf } from './protobuf.js';
import type { ResourceType } from './resources.js';
import { jsonPatch, mergePatch } from './patch.js';
import type { KubeObject } from './store.js';
import { toTable, wantsTable } from './table.js';
import { startWatch, type ActiveWatch, expiredEvent, type WatchEvent } from './watch.js';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'discovery';

export interface RequestRecord {
  method: string;
  /** The URL path, without the query. */
  path: string;
  query: string;
  verb: Verb;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/**
 * One injected failure, matched against the next requests; every given field must match. `status`
 * answers with that code (on a watch, 410 arrives as an ERROR event in the stream as the real server
 * sends it); `drop` cuts the connection (a watch is cut right after its initial events). `times`
 * (default 1) is how many requests it fails.
 */
export interface FailureRule {
  verb?: Verb;
  method?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  status?: number;
  message?: string;
  drop?: boolean;
  times?: number;
}

export type PodLogProvider = (namespace: string, name: string, container: string | undefined, tailLines: number | undefined) => string;

export interface HttpDeps {
  objects: KubeObjects;
  bookmarkIntervalMs: number;
  watches: Set<ActiveWatch>;
  requests: RequestRecord[];
  failures: FailureRule[];
  podLogs: { provider?: PodLogProvider };
}

interface Route {
  type?: ResourceType;
  group: string;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
  watchPath: boolean;
}

function parseResourcePath(deps: HttpDeps, segments: string[]): Route | undefined {
  let group: string;
  let version: string;
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 2) {
    group = '';
    version = segments[1]!;
    rest = segments.slice(2);
  } else if (segments[0] === 'apis' && segments.length >= 3) {
    group = segments[1]!;
    version = segments[2]!;
    rest = segments.slice(3);
  } else return undefined;
  if (rest.length === 0) return undefined;
  let watchPath = false;
  if (rest[0] === 'watch') {
    watchPath = true;
    rest = rest.slice(1);
  }
  const registry = deps.objects.registry;
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3 && registry.find(group, version, rest[2]!)?.namespaced) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const type = registry.find(group, version, rest[0]!);
  return { type, group, version, namespace, name: rest[1], subresource: rest[2], watchPath };
}

function send(response: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  response.end(text);
}

async function readRaw(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function readBody(request: IncomingMessage): Promise<string> {
  return (await readRaw(request)).toString('utf8');
}

/** A create or update body: JSON, or protobuf for the kinds protobuf.ts knows. */
async function readObject(request: IncomingMessage): Promise<KubeObject> {
  const raw = await readRaw(request);
  if ((request.headers['content-type'] ?? '').startsWith('application/vnd.kubernetes.protobuf')) return decodeProtobuf(raw);
  return parseBody(raw.toString('utf8'));
}

async function readDeleteOptions(request: IncomingMessage): Promise<DeleteOptions & { dryRun?: unknown }> {
  const raw = await readRaw(request);
  if ((request.headers['content-type'] ?? '').startsWith('application/vnd.kubernetes.protobuf')) return decodeDeleteOptions(raw) as DeleteOptions;
  const text = raw.toString('utf8');
  return text.trim() ? (parseBody(text) as unknown as DeleteOptions) : {};
}

function parseBody(text: string): KubeObject {
  if (!text.trim()) throw badRequest('the request body is empty');
  try {
    return JSON.parse(text) as KubeObject;
  } catch (error) {
    throw badRequest(`Object 'Kind' is missing in '${text.slice(0, 80)}': ${(error as Error).message}`);
  }
}

function verbOf(method: string, route: Route, watchQuery: boolean): Verb {
  switch (method) {
    case 'GET':
      if (route.name && !route.watchPath) return 'get';
      return route.watchPath || watchQuery ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return route.name ? 'delete' : 'deletecollection';
    default:
      throw methodNotAllowed(`the server does not allow this method on the requested resource`);
  }
}

function takeFailure(deps: HttpDeps, record: RequestRecord): FailureRule | undefined {
  const index = deps.failures.findIndex(
    (rule) =>
      (rule.verb === undefined || rule.verb === record.verb) &&
      (rule.method === undefined || rule.method === record.method) &&
      (rule.resource === undefined || rule.resource === record.resource) &&
      (rule.subresource === undefined || rule.subresource === record.subresource) &&
      (rule.namespace === undefined || rule.namespace === record.namespace) &&
      (rule.name === undefined || rule.name === record.name),
  );
  if (index < 0) return undefined;
  const rule = deps.failures[index]!;
  const remaining = (rule.times ?? 1) - 1;
  if (remaining <= 0) deps.failures.splice(index, 1);
  else deps.failures[index] = { ...rule, times: remaining };
  return rule;
}

function injectedError(rule: FailureRule): KubeStatusError {
  const code = rule.status ?? 500;
  const reasons: Record<number, string> = { 409: 'Conflict', 410: 'Expired', 429: 'TooManyRequests', 500: 'InternalError', 503: 'ServiceUnavailable', 504: 'Timeout' };
  return new KubeStatusError(code, reasons[code] ?? 'InternalError', rule.message ?? `injected failure (${code})`);
}

function writeOptionsOf(query: URLSearchParams): WriteOptions {
  return { dryRun: query.getAll('dryRun').includes('All'), fieldValidation: query.get('fieldValidation') ?? undefined };
}

export function createHandler(deps: HttpDeps) {
  return (request: IncomingMessage, response: ServerResponse): void => {
    handle(deps, request, response).catch((error: unknown) => {
      const status = error instanceof KubeStatusError ? error : new KubeStatusError(500, 'InternalError', `Internal error occurred: ${(error as Error).message}`);
      if (!response.headersSent) send(response, status.code, status.toStatus());
      else response.destroy();
    });
  };
}

async function handle(deps: HttpDeps, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://localhost');
  const method = request.method ?? 'GET';
  const segments = url.pathname.split('/').filter((segment) => segment !== '');
  const query = url.searchParams;
  const registry = deps.objects.registry;

  const route = parseResourcePath(deps, segments);
  if (!route || !route.type) {
    deps.requests.push({ method, path: url.pathname, query: url.search, verb: 'discovery' });
    if (method !== 'GET') throw notFound({ group: '', resource: url.pathname, kind: '' }, '');
    const path = url.pathname.replace(/\/$/, '');
    if (path === '/version') return send(response, 200, SERVER_VERSION);
    if (['/healthz', '/livez', '/readyz'].includes(path)) {
      response.writeHead(200, { 'Content-Type': 'text/plain' });
      return void response.end('ok');
    }
    if (path === '/api') return send(response, 200, apiVersions());
    if (path === '/openapi/v3') return send(response, 200, openApiRoot(registry));
    if (segments[0] === 'openapi' && segments[1] === 'v3') {
      const [group, version] = segments[2] === 'api' ? ['', segments[3]] : [segments[3], segments[4]];
      const document = group !== undefined && version ? openApiGroupVersion(registry, group, version) : undefined;
      if (document) return send(response, 200, document);
    }
    if (path === '/apis') return send(response, 200, apiGroupList(registry));
    if (segments[0] === 'api' && segments.length === 2) {
      const list = apiResourceList(registry, '', segments[1]!);
      if (list) return send(response, 200, list);
    }
    if (segments[0] === 'apis' && segments.length === 2) {
      const group = apiGroup(registry, segments[1]!);
      if (group) return send(response, 200, group);
    }
    if (segments[0] === 'apis' && segments.length === 3) {
      const list = apiResourceList(registry, segments[1]!, segments[2]!);
      if (list) return send(response, 200, list);
    }
    response.writeHead(404, { 'Content-Type': 'text/plain' });
    return void response.end('404 page not found\n');
  }

  const type = route.type;
  const watchQuery = query.get('watch') === 'true' || query.get('watch') === '1';
  const verb = verbOf(method, route, watchQuery);
  const record: RequestRecord = {
    method,
    path: url.pathname,
    query: url.search,
    verb,
    group: type.group,
    resource: type.resource,
    subresource: route.subresource,
    namespace: route.namespace,
    name: route.name,
  };
  deps.requests.push(record);
  const failure = takeFailure(deps, record);
  if (failure && !(verb === 'watch' && (failure.drop || failure.status === 410))) {
    if (failure.drop) return void request.socket.destroy();
    throw injectedError(failure);
  }
  const table = wantsTable(request.headers.accept);
  const objects = deps.objects;
  const namespace = route.namespace;
  const name = route.name;

  if (verb === 'watch') return serveWatch(deps, request, response, route, type, query, table, failure);

  if (method === 'GET' && verb === 'list') {
    const list = objects.list(type, namespace, {
      labelSelector: query.get('labelSelector') ?? undefined,
      fieldSelector: query.get('fieldSelector') ?? undefined,
      limit: query.has('limit') ? Number(query.get('limit')) : undefined,
      continue: query.get('continue') ?? undefined,
    });
    if (table) return send(response, 200, toTable(type, list.items, list.metadata.resourceVersion, query.get('includeObject') ?? undefined, { continue: list.metadata.continue }));
    return send(response, 200, list);
  }

  if (route.subresource) return serveSubresource(deps, request, response, route, type, query);

  switch (verb) {
    case 'get': {
      const object = objects.get(type, namespace, name!);
      if (table) return send(response, 200, toTable(type, [object], undefined, query.get('includeObject') ?? undefined));
      return send(response, 200, object);
    }
    case 'create': {
      const body = await readObject(request);
      return send(response, 201, objects.create(type, namespace, body, writeOptionsOf(query)));
    }
    case 'update': {
      const body = await readObject(request);
      return send(response, 200, objects.update(type, namespace, name!, body, writeOptionsOf(query)));
    }
    case 'patch': {
      const contentType = request.headers['content-type'] ?? 'application/json';
      const existed = objects.find(type, namespace, name!) !== undefined;
      const patched = objects.patch(type, namespace, name!, contentType, await readBody(request), { ...writeOptionsOf(query), force: query.get('force') === 'true' });
      return send(response, existed ? 200 : 201, patched);
    }
    case 'delete': {
      const options = await readDeleteOptions(request);
      return send(response, 200, objects.delete(type, namespace, name!, deleteOptionsOf(query, options)));
    }
    case 'deletecollection': {
      const options = await readDeleteOptions(request);
      const list = objects.deleteCollection(
        type,
        namespace,
        { labelSelector: query.get('labelSelector') ?? undefined, fieldSelector: query.get('fieldSelector') ?? undefined },
        deleteOptionsOf(query, options),
      );
      return send(response, 200, list);
    }
    default:
      throw methodNotAllowed('the server does not allow this method on the requested resource');
  }
}

function deleteOptionsOf(query: URLSearchParams, body: DeleteOptions & { dryRun?: unknown }): DeleteOptions {
  const grace = query.get('gracePeriodSeconds') ?? body.gracePeriodSeconds;
  const policy = (query.get('propagationPolicy') ?? body.propagationPolicy) as DeleteOptions['propagationPolicy'];
  if (policy && !['Background', 'Foreground', 'Orphan'].includes(policy)) {
    throw new KubeStatusError(422, 'Invalid', `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan"`);
  }
  return {
    propagationPolicy: policy,
    gracePeriodSeconds: grace === undefined || grace === null ? undefined : Number(grace),
    preconditions: body.preconditions,
    dryRun: query.getAll('dryRun').includes('All') || (Array.isArray(body.dryRun) && body.dryRun.includes('All')),
  };
}

function serveWatch(
  deps: HttpDeps,
  request: IncomingMessage,
  response: ServerResponse,
  route: Route,
  type: ResourceType,
  query: URLSearchParams,
  table: boolean,
  failure: FailureRule | undefined,
): void {
  // A watch on one object (`/watch/.../name`, or `fieldSelector=metadata.name=x`).
  const nameSelector = route.name ? `metadata.name=${route.name}` : undefined;
  const fieldSelector = [query.get('fieldSelector'), nameSelector].filter(Boolean).join(',') || undefined;
  response.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  response.flushHeaders();
  const write = (event: WatchEvent) => {
    const object = table && (event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED') ? toTable(type, [event.object as KubeObject], undefined, query.get('includeObject') ?? undefined) : event.object;
    response.write(`${JSON.stringify({ type: event.type, object })}\n`);
  };
  if (failure?.status === 410) {
    write(expiredEvent(query.get('resourceVersion') ?? '', deps.objects.store.oldestRevision));
    return void response.end();
  }
  // The namespace must exist for a namespaced watch, as for a list.
  if (route.namespace && !deps.objects.store.get('/namespaces', undefined, route.namespace)) {
    write({ type: 'ERROR', object: notFound({ group: '', resource: 'namespaces', kind: 'Namespace' }, route.namespace).toStatus() });
    return void response.end();
  }
  let watch: ActiveWatch | undefined;
  let ended = false;
  watch = startWatch(
    deps.objects,
    {
      type,
      namespace: route.namespace,
      labelSelector: query.get('labelSelector') ?? undefined,
      fieldSelector,
      resourceVersion: query.get('resourceVersion') ?? undefined,
      allowBookmarks: query.get('allowWatchBookmarks') === 'true',
      bookmarkIntervalMs: deps.bookmarkIntervalMs,
      timeoutSeconds: query.has('timeoutSeconds') ? Number(query.get('timeoutSeconds')) : undefined,
    },
    {
      send: write,
      end: () => {
        ended = true;
        if (watch) deps.watches.delete(watch);
        response.end();
      },
    },
  );
  if (ended) return;
  deps.watches.add(watch);
  request.on('close', () => watch?.stop());
  if (failure?.drop) {
    deps.watches.delete(watch);
    request.socket.destroy();
  }
}

async function serveSubresource(deps: HttpDeps, request: IncomingMessage, response: ServerResponse, route: Route, type: ResourceType, query: URLSearchParams): Promise<void> {
  const objects = deps.objects;
  const { namespace, name, subresource } = route;
  const method = request.method ?? 'GET';
  const unknownSubresource = () => notFound({ group: type.group, resource: `${type.resource}/${subresource}`, kind: type.kind }, name!);
  if (subresource === 'status' && type.status) {
    if (method === 'GET') return send(response, 200, objects.get(type, namespace, name!));
    const body = await readBody(request);
    if (method === 'PUT') return send(response, 200, objects.update(type, namespace, name!, parseBody(body), { ...writeOptionsOf(query), subresource: 'status' }));
    if (method === 'PATCH') {
      return send(response, 200, objects.patch(type, namespace, name!, request.headers['content-type'] ?? 'application/json', body, { ...writeOptionsOf(query), subresource: 'status' }));
    }
  }
  if (subresource === 'scale' && type.scale) {
    if (method === 'GET') return send(response, 200, objects.getScale(type, namespace, name!));
    const body = await readBody(request);
    const contentType = (request.headers['content-type'] ?? 'application/json').split(';')[0]!;
    if (method === 'PUT') return send(response, 200, objects.updateScale(type, namespace, name!, () => parseBody(body), writeOptionsOf(query)));
    if (method === 'PATCH') {
      const patch = JSON.parse(body) as unknown;
      return send(
        response,
        200,
        objects.updateScale(type, namespace, name!, (current) => (contentType === 'application/json-patch+json' ? jsonPatch(current, patch) : mergePatch(current, patch)) as KubeObject, writeOptionsOf(query)),
      );
    }
  }
  if (type.log && subresource === 'log' && method === 'GET') {
    objects.get(type, namespace, name!);
    const provider = deps.podLogs.provider;
    if (!provider) throw badRequest(`container in pod "${name}" is waiting to start: ContainerCreating`);
    const tail = query.get('tailLines');
    const text = provider(namespace!, name!, query.get('container') ?? undefined, tail === null ? undefined : Number(tail));
    response.writeHead(200, { 'Content-Type': 'text/plain' });
    return void response.end(text);
  }
  if (type.log && subresource === 'binding' && method === 'POST') {
    const body = parseBody(await readBody(request)) as KubeObject & { target?: { name?: string } };
    if (!body.target?.name) throw badRequest('a binding needs target.name');
    objects.bind(namespace!, name!, body.target.name);
    return send(response, 201, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
  }
  if (type.log && subresource === 'eviction' && method === 'POST') {
    const body = parseBody(await readBody(request)) as KubeObject & { deleteOptions?: DeleteOptions };
    objects.delete(type, namespace, name!, body.deleteOptions ?? {});
    return send(response, 201, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
  }
  throw unknownSubresource();
}
