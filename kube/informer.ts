/**
 * An informer that does not stop: @kubernetes/client-node's ListWatch (list, then watch from the
 * list's resourceVersion, re-list on 410 Gone) with what it lacks for a controller that must run
 * for months. Its informer stops for good on any error other than 410: here it restarts with
 * backoff (from the last resourceVersion, or with a fresh list when it never got one). It backs a
 * cleanly closed watch off up to 30 s while nothing arrives: here a closed watch reopens within
 * a short backoff, and watches ask for bookmarks so a quiet one keeps its place. And every
 * `resyncMs` each cached object is delivered again, so a missed event costs at most one period.
 */
import { type KubeConfig, type KubernetesObject, ListWatch, Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { httpStatus, statusMessage } from './kube-errors.js';

export type InformerEvent = 'add' | 'update' | 'delete' | 'resync';

/** Objects as the API returns them (our custom resources keep RFC 3339 strings where the library's types say Date). */
export interface InformerOptions<T extends object> {
  kubeConfig: KubeConfig;
  /** The collection's path, e.g. /api/v1/namespaces/ns/pods. */
  path: string;
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
  labelSelector?: string;
  resyncMs: number;
  onEvent: (event: InformerEvent, object: T) => void;
  onError?: (error: unknown, retryInMs: number) => void;
  /** Called after each (re-)list: metrics, readiness. */
  onList?: () => void;
}

/** An informer's `onError` that says which watch failed, why, and when it restarts. */
export function warnOnRestart(logger: Logger, resource: string): NonNullable<InformerOptions<object>['onError']> {
  return (error, retryInMs) =>
    logger.warn({ error: statusMessage(error), code: httpStatus(error), resource, retry_in_ms: retryInMs }, 'watch failed; restarting');
}

const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

export class Informer<T extends object> {
  private readonly listWatch: ListWatch<KubernetesObject>;
  private resyncTimer: NodeJS.Timeout | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private backoffMs = MIN_BACKOFF_MS;
  private stopped = true;
  private listed = false;

  constructor(private readonly options: InformerOptions<T>) {
    const watch = new ReopeningWatch(
      options.kubeConfig,
      () => this.nextBackoff(),
      () => this.eventArrived(),
    );
    const list = async () => {
      const result = await options.list();
      this.listed = true;
      options.onList?.();
      return result as { items: KubernetesObject[] };
    };
    this.listWatch = new ListWatch<KubernetesObject>(options.path, watch, list, false, options.labelSelector);
    this.listWatch.on('add', (o) => options.onEvent('add', o as T));
    this.listWatch.on('update', (o) => options.onEvent('update', o as T));
    this.listWatch.on('delete', (o) => options.onEvent('delete', o as T));
    this.listWatch.on('error', (error) => this.restartLater(error));
  }

  /** Whether the cache has been filled by a list at least once. */
  get synced(): boolean {
    return this.listed;
  }

  /** Resolves once the first list is in the cache and the watch is open (or failed, then retried). */
  async start(): Promise<void> {
    this.stopped = false;
    this.resyncTimer = setInterval(() => {
      for (const object of this.listWatch.list()) this.options.onEvent('resync', object as T);
    }, this.options.resyncMs);
    this.resyncTimer.unref();
    await this.listWatch.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.resyncTimer);
    clearTimeout(this.restartTimer);
    await this.listWatch.stop();
  }

  get(name: string, namespace: string): T | undefined {
    return this.listWatch.get(name, namespace) as T | undefined;
  }

  list(namespace?: string): readonly T[] {
    return this.listWatch.list(namespace) as readonly T[];
  }

  private eventArrived(): void {
    this.backoffMs = MIN_BACKOFF_MS;
  }

  private nextBackoff(): number {
    const delay = this.backoffMs;
    this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
    return delay;
  }

  private restartLater(error: unknown): void {
    if (this.stopped) return;
    const retryInMs = this.nextBackoff();
    this.options.onError?.(error, retryInMs);
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      if (!this.stopped) void this.listWatch.start();
    }, retryInMs);
    this.restartTimer.unref();
  }
}

/**
 * A Watch that asks for bookmarks and reports a cleanly closed stream to ListWatch as a client
 * timeout, which ListWatch reopens at once from its resourceVersion, after our own short backoff
 * (growing while nothing arrives, reset by any event, capped at 5 s) instead of its own, capped at 30 s.
 */
class ReopeningWatch extends Watch {
  constructor(
    config: KubeConfig,
    private readonly backoffMs: () => number,
    private readonly eventArrived: () => void,
  ) {
    super(config);
  }

  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    // biome-ignore lint/suspicious/noExplicitAny: the override repeats @kubernetes/client-node's Watch.watch signature, whose objects are untyped
    callback: (phase: string, apiObj: any, watchObj?: any) => void,
    // biome-ignore lint/suspicious/noExplicitAny: as above, the library's signature
    done: (err: any) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true },
      (phase, object, raw) => {
        this.eventArrived();
        callback(phase, object, raw);
      },
      (error) => {
        if (error) return done(error);
        const reopen = new DOMException('watch closed by the server', 'TimeoutError');
        setTimeout(() => done(reopen), this.backoffMs()).unref();
      },
    );
  }
}
