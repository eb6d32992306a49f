/**
 * Watches: a stream of `{type, object}` lines for one resource (in one namespace or all), filtered
 * by label and field selectors, from a resourceVersion. Without one (or with "0") the watch starts
 * with an ADDED event per current object, as the real server does. From a version older than the
 * kept history it sends one ERROR event carrying a 410 Expired Status and ends, which is what makes
 * informers re-list. An object that stops (starts) matching the selectors is reported DELETED
 * (ADDED). BOOKMARK events carry the current revision when the client allows them.
 */
import type { KubeObjects } from './objects.js';
import { apiVersionOf, type ResourceType } from './resources.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import type { KubeObject, StoreChange } from './store.js';

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Record<string, unknown>;
}

export interface WatchRequest {
  type: ResourceType;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowBookmarks: boolean;
  bookmarkIntervalMs: number;
  timeoutSeconds?: number;
}

export interface WatchSink {
  send(event: WatchEvent): void;
  end(): void;
}

export interface ActiveWatch {
  request: WatchRequest;
  /** Ends the stream from the server side, as an apiserver restart or a load balancer timeout would. */
  stop(): void;
}

export function expiredEvent(requested: string, oldest: number): WatchEvent {
  return {
    type: 'ERROR',
    object: {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `too old resource version: ${requested} (${oldest})`,
      reason: 'Expired',
      code: 410,
    },
  };
}

export function startWatch(objects: KubeObjects, request: WatchRequest, sink: WatchSink): ActiveWatch {
  const { type } = request;
  const labels = parseLabelSelector(request.labelSelector);
  const fields = parseFieldSelector(request.fieldSelector);
  const outward = (object: KubeObject) => objects.present(type, object);
  const matches = (object: KubeObject | undefined) =>
    object !== undefined &&
    (request.namespace === undefined || !type.namespaced || object.metadata.namespace === request.namespace) &&
    labels(outward(object)) &&
    fields(outward(object));

  let stopped = false;
  const timers: NodeJS.Timeout[] = [];
  let unsubscribe = () => {};
  const stop = () => {
    if (stopped) return;
    stopped = true;
    unsubscribe();
    for (const timer of timers) clearTimeout(timer);
    sink.end();
  };

  const deliver = (change: StoreChange) => {
    if (stopped || change.storageKey !== type.storageKey) return;
    const now = matches(change.object);
    const before = matches(change.previous);
    if (change.type === 'ADDED' && now) sink.send({ type: 'ADDED', object: outward(change.object) });
    if (change.type === 'DELETED' && (before || now)) sink.send({ type: 'DELETED', object: outward(change.object) });
    if (change.type === 'MODIFIED') {
      if (now && before) sink.send({ type: 'MODIFIED', object: outward(change.object) });
      else if (now) sink.send({ type: 'ADDED', object: outward(change.object) });
      else if (before) sink.send({ type: 'DELETED', object: outward(change.object) });
    }
  };

  const store = objects.store;
  const requested = request.resourceVersion;
  if (!requested || requested === '0') {
    const { items } = store.list(type.storageKey, type.namespaced ? request.namespace : undefined);
    for (const object of items) if (matches(object)) sink.send({ type: 'ADDED', object: outward(object) });
  } else {
    const revision = Number(requested);
    const changes = Number.isInteger(revision)
      ? store.changesSince(revision, type.storageKey)
      : { expired: true as const, oldest: store.oldestRevision };
    if ('expired' in changes) {
      sink.send(expiredEvent(requested, changes.oldest));
      stop();
      return { request, stop };
    }
    for (const change of changes) deliver(change);
  }
  unsubscribe = store.subscribe(deliver);

  if (request.allowBookmarks) {
    const bookmark = () => {
      if (stopped) return;
      sink.send({
        type: 'BOOKMARK',
        object: { kind: type.kind, apiVersion: apiVersionOf(type), metadata: { resourceVersion: String(store.currentRevision) } },
      });
      timers[0] = setTimeout(bookmark, request.bookmarkIntervalMs).unref();
    };
    timers[0] = setTimeout(bookmark, request.bookmarkIntervalMs).unref();
  }
  if (request.timeoutSeconds && request.timeoutSeconds > 0) timers.push(setTimeout(stop, request.timeoutSeconds * 1000).unref());
  return { request, stop };
}
