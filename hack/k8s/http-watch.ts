/**
 * Watch requests over HTTP: a chunked stream of JSON lines (tables when asked), ended cleanly by the
 * watch or cut by a test (`ServedWatch.abort`), with the injected failures a flaky server shows.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { notFound } from './errors.js';
import type { FailureRule, HttpDeps, Route, ServedWatch } from './http-types.js';
import type { ResourceType } from './resources.js';
import type { KubeObject } from './store.js';
import { toTable } from './table.js';
import { expiredEvent, startWatch, type WatchEvent } from './watch.js';

/** An open watch stream: `stop` ends it cleanly, `abort` cuts its connection. */
export function serveWatch(
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
    const object =
      table && (event.type === 'ADDED' || event.type === 'MODIFIED' || event.type === 'DELETED')
        ? toTable(type, [event.object as KubeObject], undefined, query.get('includeObject') ?? undefined)
        : event.object;
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
  let served: ServedWatch | undefined;
  let ended = false;
  const watch = startWatch(
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
        if (served) deps.watches.delete(served);
        response.end();
      },
    },
  );
  if (ended) return;
  served = {
    resource: type.resource,
    stop: () => watch.stop(),
    abort: () => {
      deps.watches.delete(served!);
      request.socket.destroy();
    },
  };
  deps.watches.add(served);
  request.on('close', () => watch.stop());
  if (failure?.drop) served.abort();
}
