/**
 * The REST surface: URL routing (/api/v1/..., /apis/<group>/<version>/..., namespaced and cluster
 * paths, the legacy /watch/ prefix, subresources), request bodies (JSON, or YAML for server-side
 * apply), content negotiation for tables, watch streams, and the failure injection of tests. One
 * error boundary turns thrown KubeStatusErrors into Status responses.
 *
 * Every request is authenticated (authentication.ts) and authorized by RBAC (authorization.ts)
 * before it is routed, as kube-apiserver's filters do.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { authorizeOrThrow, resourceAttributes } from './authorization.js';
import { apiGroup, apiGroupList, apiResourceList, apiVersions, SERVER_VERSION } from './discovery.js';
import { KubeStatusError, methodNotAllowed } from './errors.js';
import { deleteOptionsOf, patchOptionsOf, readBody, readDeleteOptions, readObject, send, writeOptionsOf } from './http-io.js';
import { serveSubresource } from './http-subresources.js';
import { serveWatch } from './http-watch.js';
import type { FailureRule, HttpDeps, RequestRecord, Route, Verb } from './http-types.js';
import { openApiGroupVersion, openApiRoot } from './openapi.js';
import type { ResourceRegistry } from './resources.js';
import { review } from './reviews.js';
import { toTable, wantsTable } from './table.js';

export type { FailureRule, HttpDeps, RequestRecord, Route, ServedWatch, Verb } from './http-types.js';
export type { PodLogProvider } from './pod-report.js';

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
  const reasons: Record<number, string> = {
    409: 'Conflict',
    410: 'Expired',
    429: 'TooManyRequests',
    500: 'InternalError',
    503: 'ServiceUnavailable',
    504: 'Timeout',
  };
  return new KubeStatusError(code, reasons[code] ?? 'InternalError', rule.message ?? `injected failure (${code})`);
}

export function createHandler(deps: HttpDeps) {
  return (request: IncomingMessage, response: ServerResponse): void => {
    handle(deps, request, response).catch((error: unknown) => {
      const status =
        error instanceof KubeStatusError
          ? error
          : new KubeStatusError(500, 'InternalError', `Internal error occurred: ${(error as Error).message}`);
      if (!response.headersSent) send(response, status.code, status.toStatus());
      else response.destroy();
    });
  };
}

function serveDiscovery(response: ServerResponse, method: string, segments: string[], registry: ResourceRegistry): void {
  const path = `/${segments.join('/')}`;
  const found = (): unknown => {
    if (method !== 'GET') return undefined;
    if (path === '/version') return SERVER_VERSION;
    if (path === '/api') return apiVersions();
    if (path === '/apis') return apiGroupList(registry);
    if (path === '/openapi/v3') return openApiRoot(registry);
    if (segments[0] === 'openapi' && segments[1] === 'v3') {
      const [group, version] = segments[2] === 'api' ? ['', segments[3]] : [segments[3], segments[4]];
      return group !== undefined && version ? openApiGroupVersion(registry, group, version) : undefined;
    }
    if (segments[0] === 'api' && segments.length === 2) return apiResourceList(registry, '', segments[1]!);
    if (segments[0] === 'apis' && segments.length === 2) return apiGroup(registry, segments[1]!);
    if (segments[0] === 'apis' && segments.length === 3) return apiResourceList(registry, segments[1]!, segments[2]!);
    return undefined;
  };
  if (method === 'GET' && ['/healthz', '/livez', '/readyz'].includes(path)) {
    response.writeHead(200, { 'Content-Type': 'text/plain' });
    response.end('ok');
    return;
  }
  const body = found();
  if (body) {
    send(response, 200, body);
    return;
  }
  response.writeHead(404, { 'Content-Type': 'text/plain' });
  response.end('404 page not found\n');
}

/** Logs the request for tests, with its status once answered. */
function logRequest(deps: HttpDeps, response: ServerResponse, record: RequestRecord): RequestRecord {
  deps.requests.push(record);
  response.once('finish', () => {
    record.status = response.statusCode;
  });
  return record;
}

async function handle(deps: HttpDeps, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://localhost');
  const method = request.method ?? 'GET';
  const segments = url.pathname.split('/').filter((segment) => segment !== '');
  const query = url.searchParams;
  const registry = deps.objects.registry;

  const user = deps.authenticator.authenticate(request);
  const route = parseResourcePath(deps, segments);
  if (!route) {
    logRequest(deps, response, { method, path: url.pathname, query: url.search, verb: 'discovery', user: user.username });
    authorizeOrThrow(deps.authorizer, { user, verb: method.toLowerCase(), path: url.pathname });
    return serveDiscovery(response, method, segments, registry);
  }
  if (!route.type) {
    deps.requests.push({ method, path: url.pathname, query: url.search, verb: 'discovery' });
    // A resource path whose kind is not served answers as the real server does, with a Status.
    throw new KubeStatusError(404, 'NotFound', 'the server could not find the requested resource');
  }

  const type = route.type;
  const watchQuery = query.get('watch') === 'true' || query.get('watch') === '1';
  const verb = verbOf(method, route, watchQuery);
  const record = logRequest(deps, response, {
    method,
    path: url.pathname,
    query: url.search,
    verb,
    group: type.group,
    resource: type.resource,
    subresource: route.subresource,
    namespace: route.namespace,
    name: route.name,
    user: user.username,
  });
  authorizeOrThrow(deps.authorizer, resourceAttributes(user, record, query));
  const failure = takeFailure(deps, record);
  if (failure && !(verb === 'watch' && (failure.drop || failure.status === 410))) {
    if (failure.drop) return void request.socket.destroy();
    throw injectedError(failure);
  }
  const table = wantsTable(request.headers.accept);
  const objects = deps.objects;
  const namespace = route.namespace;
  const name = route.name;

  if (type.createOnly) {
    if (verb !== 'create') throw methodNotAllowed('the server does not allow this method on the requested resource');
    return send(response, 201, review(type.kind, await readObject(request), user, deps.authorizer));
  }
  if (verb === 'watch') return serveWatch(deps, request, response, route, type, query, table, failure);

  if (method === 'GET' && verb === 'list') {
    const list = objects.list(type, namespace, {
      labelSelector: query.get('labelSelector') ?? undefined,
      fieldSelector: query.get('fieldSelector') ?? undefined,
      limit: query.has('limit') ? Number(query.get('limit')) : undefined,
      continue: query.get('continue') ?? undefined,
    });
    if (table)
      return send(
        response,
        200,
        toTable(type, list.items, list.metadata.resourceVersion, query.get('includeObject') ?? undefined, {
          continue: list.metadata.continue,
        }),
      );
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
      const warnings: string[] = [];
      const created = objects.create(type, namespace, body, { ...writeOptionsOf(query, request), warnings });
      // RFC 7234 warn-code 299 with an empty agent, and the text quoted as Go's strconv.Quote does.
      if (warnings.length)
        response.setHeader(
          'Warning',
          warnings.map((text) => `299 - ${JSON.stringify(text)}`),
        );
      return send(response, 201, created);
    }
    case 'update': {
      const body = await readObject(request);
      return send(response, 200, objects.update(type, namespace, name!, body, writeOptionsOf(query, request)));
    }
    case 'patch': {
      const contentType = request.headers['content-type'] ?? 'application/json';
      const existed = objects.find(type, namespace, name!) !== undefined;
      const patched = objects.patch(
        type,
        namespace,
        name!,
        contentType,
        await readBody(request),
        patchOptionsOf(query, contentType, request),
      );
      return send(response, existed ? 200 : 201, patched);
    }
    case 'delete': {
      const options = await readDeleteOptions(request);
      const deleted = objects.delete(type, namespace, name!, deleteOptionsOf(query, options));
      // Like the real server: the object while it awaits finalizers or a kubelet, and for pods and
      // custom resources; otherwise a Success Status naming what went.
      const pending = objects.find(type, namespace, name!)?.metadata.uid === deleted.metadata.uid;
      if (pending || type.custom || type.storageKey === '/pods') return send(response, 200, deleted);
      return send(response, 200, {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name: deleted.metadata.name, group: type.group || undefined, kind: type.resource, uid: deleted.metadata.uid },
      });
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
