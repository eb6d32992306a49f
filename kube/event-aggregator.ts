/**
 * Events whose cause a hostile party can repeat at will (an untrusted pod's refused requests), kept
 * to a bounded number of API writes, as client-go's event correlator aggregates repeats: one Event
 * per (object, reason), created on the first occurrence and afterwards updated at most once per
 * `windowMs` with the count and the latest message. A burst of N refusals costs one create and a
 * patch per window, never N writes. The keys it remembers are capped too (the oldest forgotten
 * first, which at worst starts a new Event for it).
 */
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { EventRecord } from './kube-client.js';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string | undefined; uid?: string | undefined };
}

interface Series {
  /** The Event's name once created. */
  name?: string;
  count: number;
  /** The count the API server has. */
  written: number;
  message: string;
  first: Date;
  last: Date;
  lastWrite: number;
  timer?: NodeJS.Timeout | undefined;
  writing?: Promise<void> | undefined;
}

export interface EventAggregatorOptions {
  reporter: { component: string; instance: string };
  /** At most one write per Event per window. */
  windowMs?: number;
  /** How many (object, reason) series it remembers. */
  maxSeries?: number;
  onError(error: unknown): void;
  now?: () => number;
}

const DEFAULT_WINDOW_MS = 10_000;
const DEFAULT_MAX_SERIES = 1000;

export class EventAggregator {
  private readonly core: CoreV1Api;
  private readonly series = new Map<string, Series>();
  private readonly windowMs: number;
  private readonly maxSeries: number;
  private readonly now: () => number;
  private closed = false;

  constructor(
    kubeConfig: KubeConfig,
    private readonly options: EventAggregatorOptions,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.windowMs = options.windowMs ?? DEFAULT_WINDOW_MS;
    this.maxSeries = options.maxSeries ?? DEFAULT_MAX_SERIES;
    this.now = options.now ?? Date.now;
  }

  /** Counts one occurrence; written now, or with the next write of its series. */
  record(involved: InvolvedObject, event: EventRecord): void {
    if (this.closed) return;
    const key = `${involved.metadata.namespace}/${involved.metadata.uid ?? involved.metadata.name}/${event.type}/${event.reason}`;
    const at = new Date(this.now());
    let series = this.series.get(key);
    if (!series) {
      series = { count: 0, written: 0, message: event.message, first: at, last: at, lastWrite: 0 };
      this.remember(key, series);
    }
    series.count += 1;
    series.message = event.message;
    series.last = at;
    this.schedule(involved, event, series);
  }

  /** Writes what is pending and stops. */
  async close(): Promise<void> {
    this.closed = true;
    for (const series of this.series.values()) clearTimeout(series.timer);
    await Promise.all([...this.series.values()].map((s) => s.writing));
  }

  private remember(key: string, series: Series): void {
    if (this.series.size >= this.maxSeries) {
      const [oldestKey, oldest] = this.series.entries().next().value!;
      clearTimeout(oldest.timer);
      this.series.delete(oldestKey);
    }
    this.series.set(key, series);
  }

  private schedule(involved: InvolvedObject, event: EventRecord, series: Series): void {
    if (series.timer || series.writing) return;
    const due = series.lastWrite + this.windowMs - this.now();
    if (due <= 0) {
      this.write(involved, event, series);
      return;
    }
    series.timer = setTimeout(() => {
      series.timer = undefined;
      this.write(involved, event, series);
    }, due);
    series.timer.unref();
  }

  private write(involved: InvolvedObject, event: EventRecord, series: Series): void {
    series.lastWrite = this.now();
    const count = series.count;
    series.writing = this.send(involved, event, series, count)
      .then(() => {
        series.written = count;
      })
      .catch((error: unknown) => this.options.onError(error))
      .finally(() => {
        series.writing = undefined;
        // Occurrences that came in meanwhile go with the next window's write.
        if (series.count > series.written && !this.closed) this.schedule(involved, event, series);
      });
  }

  private async send(involved: InvolvedObject, event: EventRecord, series: Series, count: number): Promise<void> {
    const namespace = involved.metadata.namespace!;
    if (series.name) {
      await this.core.patchNamespacedEvent(
        { name: series.name, namespace, body: { count, message: series.message, lastTimestamp: series.last } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      return;
    }
    const { reporter } = this.options;
    const created = await this.core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { generateName: `${involved.metadata.name}.`, namespace },
        involvedObject: {
          apiVersion: involved.apiVersion,
          kind: involved.kind,
          name: involved.metadata.name,
          namespace,
          uid: involved.metadata.uid,
        },
        type: event.type,
        reason: event.reason,
        message: series.message,
        count,
        firstTimestamp: series.first,
        lastTimestamp: series.last,
        source: { component: reporter.component },
        reportingComponent: reporter.component,
        reportingInstance: reporter.instance,
      },
    });
    series.name = created.metadata?.name;
  }
}
