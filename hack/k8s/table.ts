/**
 * Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which is what
 * `kubectl get` shows: a CRD's additionalPrinterColumns (a JSONPath subset: dotted fields with `\.`
 * escapes, `[n]`, `['key']` and `[?(@.field=="value")]` filters), kubelet-like columns for pods and
 * nodes, NAME and AGE for everything else. Columns with priority > 0 appear only with `-o wide`.
 */
import type { PrinterColumn, ResourceType } from './resources.js';
import type { KubeObject } from './store.js';

export function wantsTable(accept: string | undefined): boolean {
  return /as=Table/.test(accept ?? '');
}

/**
 * kubectl's age format (k8s.io/apimachinery duration.HumanDuration). A time in the future prints as
 * `<invalid>`, as on a real cluster: a `date` printer column suits past times only.
 */
export function humanDuration(milliseconds: number): string {
  const exact = Math.floor(milliseconds / 1000);
  if (exact < -1) return '<invalid>';
  const seconds = Math.max(0, exact);
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (days < 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (days < 365 * 2) return `${days}d`;
  return `${Math.floor(days / 365)}y`;
}

type Segment = { field: string } | { index: number } | { filter: { path: string[]; value: string } };

function parseJsonPath(text: string): Segment[] {
  const source = text.trim().replace(/^\{/, '').replace(/\}$/, '').replace(/^\$/, '');
  const segments: Segment[] = [];
  let index = 0;
  while (index < source.length) {
    const char = source[index]!;
    if (char === '.') {
      index++;
      let field = '';
      while (index < source.length && source[index] !== '.' && source[index] !== '[') {
        if (source[index] === '\\' && index + 1 < source.length) index++;
        field += source[index++];
      }
      if (field) segments.push({ field });
    } else if (char === '[') {
      const end = source.indexOf(']', index);
      const inner = source.slice(index + 1, end);
      index = end + 1;
      const filter = /^\?\(@\.([^=!]+?)\s*==\s*["']([^"']*)["']\)$/.exec(inner);
      if (filter) segments.push({ filter: { path: filter[1]!.split('.'), value: filter[2]! } });
      else if (/^-?\d+$/.test(inner)) segments.push({ index: Number(inner) });
      else segments.push({ field: inner.replace(/^['"]|['"]$/g, '') });
    } else index++;
  }
  return segments;
}

export function evaluateJsonPath(object: unknown, path: string): unknown {
  let current: unknown[] = [object];
  for (const segment of parseJsonPath(path)) {
    const next: unknown[] = [];
    for (const value of current) {
      if ('field' in segment && value && typeof value === 'object' && !Array.isArray(value)) {
        const found = (value as Record<string, unknown>)[segment.field];
        if (found !== undefined) next.push(found);
      } else if ('index' in segment && Array.isArray(value)) {
        const found = value.at(segment.index);
        if (found !== undefined) next.push(found);
      } else if ('filter' in segment && Array.isArray(value)) {
        for (const item of value) {
          let probe: unknown = item;
          for (const part of segment.filter.path)
            probe = probe && typeof probe === 'object' ? (probe as Record<string, unknown>)[part] : undefined;
          if (String(probe) === segment.filter.value) next.push(item);
        }
      }
    }
    current = next;
  }
  return current.length === 0 ? undefined : current.length === 1 ? current[0] : current;
}

function formatCell(value: unknown, column: Pick<PrinterColumn, 'type'>, now: number): unknown {
  if (value === undefined || value === null) return column.type === 'integer' || column.type === 'number' ? null : '<none>';
  if (column.type === 'date') {
    const time = Date.parse(String(value));
    return Number.isNaN(time) ? '<unknown>' : humanDuration(now - time);
  }
  if (column.type === 'integer' || column.type === 'number') return typeof value === 'number' ? value : Number(value);
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

interface Column {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
  cell(object: KubeObject, now: number): unknown;
}

const nameColumn: Column = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace.',
  cell: (object) => object.metadata.name,
};
const ageColumn: Column = {
  name: 'Age',
  type: 'string',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
  cell: (object, now) => formatCell(object.metadata.creationTimestamp, { type: 'date' }, now),
};

interface ContainerStatus {
  ready?: boolean;
  restartCount?: number;
  state?: { waiting?: { reason?: string }; terminated?: { reason?: string; exitCode?: number; signal?: number } };
}

/** The STATUS column of `kubectl get pods` (kubelet's reason if any, else the phase; Terminating when deleted). */
export function podStatusReason(pod: KubeObject): string {
  const status = (pod.status ?? {}) as { phase?: string; reason?: string; containerStatuses?: ContainerStatus[] };
  let reason = status.reason ?? status.phase ?? 'Unknown';
  for (const container of status.containerStatuses ?? []) {
    const waiting = container.state?.waiting?.reason;
    const terminated = container.state?.terminated;
    if (waiting) reason = waiting;
    else if (terminated)
      reason = terminated.reason ?? (terminated.signal ? `Signal:${terminated.signal}` : `ExitCode:${terminated.exitCode}`);
  }
  if (pod.metadata.deletionTimestamp) reason = 'Terminating';
  return reason;
}

const podColumns: Column[] = [
  nameColumn,
  {
    name: 'Ready',
    type: 'string',
    description: 'The aggregate readiness state of this pod for accepting traffic.',
    cell: (pod) => {
      const containers = ((pod.spec as { containers?: unknown[] })?.containers ?? []).length;
      const ready = ((pod.status as { containerStatuses?: ContainerStatus[] })?.containerStatuses ?? []).filter(
        (status) => status.ready,
      ).length;
      return `${ready}/${containers}`;
    },
  },
  { name: 'Status', type: 'string', description: 'The aggregate status of the containers in this pod.', cell: podStatusReason },
  {
    name: 'Restarts',
    type: 'string',
    description: 'The number of times the containers in this pod have been restarted.',
    cell: (pod) =>
      String(
        ((pod.status as { containerStatuses?: ContainerStatus[] })?.containerStatuses ?? []).reduce(
          (sum, status) => sum + (status.restartCount ?? 0),
          0,
        ),
      ),
  },
  ageColumn,
  {
    name: 'IP',
    type: 'string',
    priority: 1,
    description: 'IP address allocated to the pod.',
    cell: (pod) => (pod.status as { podIP?: string })?.podIP ?? '<none>',
  },
  {
    name: 'Node',
    type: 'string',
    priority: 1,
    description: 'Name of the Node to which this pod is assigned.',
    cell: (pod) => (pod.spec as { nodeName?: string })?.nodeName ?? '<none>',
  },
  { name: 'Nominated Node', type: 'string', priority: 1, description: 'Name of the Node nominated.', cell: () => '<none>' },
  { name: 'Readiness Gates', type: 'string', priority: 1, description: 'Readiness gates.', cell: () => '<none>' },
];

const nodeColumns: Column[] = [
  nameColumn,
  {
    name: 'Status',
    type: 'string',
    description: 'The status of the node.',
    cell: (node) => {
      const ready = ((node.status as { conditions?: Array<{ type: string; status: string }> })?.conditions ?? []).find(
        (condition) => condition.type === 'Ready',
      );
      return ready?.status === 'True' ? 'Ready' : 'NotReady';
    },
  },
  { name: 'Roles', type: 'string', cell: () => '<none>' },
  ageColumn,
  {
    name: 'Version',
    type: 'string',
    cell: (node) => (node.status as { nodeInfo?: { kubeletVersion?: string } })?.nodeInfo?.kubeletVersion ?? '',
  },
];

const eventColumns: Column[] = [
  {
    name: 'Last Seen',
    type: 'string',
    cell: (event, now) =>
      formatCell(
        event.lastTimestamp ??
          (event.series as { lastObservedTime?: string } | undefined)?.lastObservedTime ??
          event.eventTime ??
          event.metadata.creationTimestamp,
        { type: 'date' },
        now,
      ),
  },
  { name: 'Type', type: 'string', cell: (event) => event.type ?? '' },
  { name: 'Reason', type: 'string', cell: (event) => event.reason ?? '' },
  {
    name: 'Object',
    type: 'string',
    cell: (event) => {
      const involved = (event.involvedObject ?? {}) as { kind?: string; name?: string };
      return `${(involved.kind ?? '').toLowerCase()}/${involved.name ?? ''}`;
    },
  },
  { name: 'Message', type: 'string', cell: (event) => event.message ?? '' },
];

function columnsFor(type: ResourceType): Column[] {
  if (type.printerColumns) {
    return [
      nameColumn,
      ...type.printerColumns.map((column) => ({
        name: column.name,
        type: column.type,
        format: column.format,
        description: column.description,
        priority: column.priority,
        cell: (object: KubeObject, now: number) => formatCell(evaluateJsonPath(object, column.jsonPath), column, now),
      })),
    ];
  }
  if (type.storageKey === '/pods') return podColumns;
  if (type.storageKey === '/nodes') return nodeColumns;
  if (type.storageKey === '/events' && !type.group) return eventColumns;
  if (type.storageKey === '/namespaces') {
    return [
      nameColumn,
      { name: 'Status', type: 'string', cell: (object) => (object.status as { phase?: string })?.phase ?? '' },
      ageColumn,
    ];
  }
  return [nameColumn, ageColumn];
}

export function toTable(
  type: ResourceType,
  items: KubeObject[],
  resourceVersion: string | undefined,
  includeObject: string | undefined,
  extraMetadata: Record<string, unknown> = {},
): Record<string, unknown> {
  const columns = columnsFor(type);
  const now = Date.now();
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { ...(resourceVersion ? { resourceVersion } : {}), ...extraMetadata },
    columnDefinitions: columns.map((column) => ({
      name: column.name,
      type: column.type,
      format: column.format ?? '',
      description: column.description ?? '',
      priority: column.priority ?? 0,
    })),
    rows: items.map((object) => ({
      cells: columns.map((column) => column.cell(object, now)),
      object:
        includeObject === 'Object'
          ? object
          : includeObject === 'None'
            ? undefined
            : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata },
    })),
  };
}
