/**
 * Sets of field paths, as server-side apply's managed fields hold them (sigs.k8s.io/structured-merge-diff,
 * the `fieldpath` package): a path is a list of elements, each a field name `f:name`, a list item by
 * its key fields `k:{"name":"main"}`, a set member by its value `v:"x"`, or an index `i:0`. On the
 * wire (`fieldsType: FieldsV1`) a set is a tree: `{}` for a member with nothing under it, `".": {}`
 * for a member that has children too. Paths print as in the server's messages: `.spec.replicas`,
 * `.spec.containers[name="main"].image`, `[="x"]`, `[0]`.
 *
 * https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management
 */

/** One path: its elements in the `f:` / `k:` / `v:` / `i:` encoding. */
export type FieldPath = readonly string[];

/** Paths kept by their JSON text, so the set operations are those of a plain Set. */
export class FieldSet {
  private readonly paths: Set<string>;

  constructor(paths: Iterable<string> = []) {
    this.paths = new Set(paths);
  }

  static of(paths: Iterable<FieldPath>): FieldSet {
    return new FieldSet([...paths].map((path) => JSON.stringify(path)));
  }

  insert(path: FieldPath): void {
    this.paths.add(JSON.stringify(path));
  }

  has(path: FieldPath): boolean {
    return this.paths.has(JSON.stringify(path));
  }

  get empty(): boolean {
    return this.paths.size === 0;
  }

  list(): FieldPath[] {
    return [...this.paths].map((text) => JSON.parse(text) as FieldPath);
  }

  union(other: FieldSet): FieldSet {
    return new FieldSet([...this.paths, ...other.paths]);
  }

  difference(other: FieldSet): FieldSet {
    return new FieldSet([...this.paths].filter((path) => !other.paths.has(path)));
  }

  intersection(other: FieldSet): FieldSet {
    return new FieldSet([...this.paths].filter((path) => other.paths.has(path)));
  }

  /** Without the paths under (or at) any of `prefixes`. */
  without(prefixes: FieldPath[]): FieldSet {
    return FieldSet.of(this.list().filter((path) => !prefixes.some((prefix) => startsWith(path, prefix))));
  }

  /** Only the paths under (or at) `prefix`. */
  within(prefix: FieldPath): FieldSet {
    return FieldSet.of(this.list().filter((path) => startsWith(path, prefix)));
  }

  /** Whether this set holds `path` or anything under it. */
  touches(path: FieldPath): boolean {
    return this.list().some((member) => startsWith(member, path));
  }
}

export function startsWith(path: FieldPath, prefix: FieldPath): boolean {
  return prefix.length <= path.length && prefix.every((element, index) => path[index] === element);
}

type FieldsV1 = { [element: string]: FieldsV1 };

/** The FieldsV1 tree of a set, children in the order the server writes them (members first, then sorted). */
export function encodeFieldsV1(set: FieldSet): FieldsV1 {
  const root: FieldsV1 = {};
  for (const path of set.list()) {
    let node = root;
    for (const element of path) node = node[element] ??= {};
    node['.'] = {};
  }
  return normalise(root);
}

/** A member with no children is `{}`; a member with children keeps `".": {}`. */
function normalise(node: FieldsV1): FieldsV1 {
  const children = Object.keys(node)
    .filter((key) => key !== '.')
    .sort(compareElements);
  if (children.length === 0) return {};
  const result: FieldsV1 = node['.'] ? { '.': {} } : {};
  for (const key of children) result[key] = normalise(node[key]!);
  return result;
}

const ELEMENT_ORDER = ['f', 'k', 'v', 'i'];

function compareElements(left: string, right: string): number {
  const byType = ELEMENT_ORDER.indexOf(left[0]!) - ELEMENT_ORDER.indexOf(right[0]!);
  if (byType !== 0) return byType;
  return left < right ? -1 : left > right ? 1 : 0;
}

export function decodeFieldsV1(tree: unknown): FieldSet {
  const set = new FieldSet();
  const walk = (node: unknown, path: string[]) => {
    if (typeof node !== 'object' || node === null) return;
    const keys = Object.keys(node);
    if (path.length > 0 && (keys.length === 0 || keys.includes('.'))) set.insert(path);
    for (const key of keys) if (key !== '.') walk((node as Record<string, unknown>)[key], [...path, key]);
  };
  walk(tree, []);
  return set;
}

/** `.spec.containers[name="main"].image`, as the API server's conflict messages print a path. */
export function printPath(path: FieldPath): string {
  return path
    .map((element) => {
      const body = element.slice(2);
      switch (element[0]) {
        case 'f':
          return `.${body}`;
        case 'k': {
          const key = JSON.parse(body) as Record<string, unknown>;
          return `[${Object.entries(key)
            .map(([field, value]) => `${field}=${JSON.stringify(value)}`)
            .join(',')}]`;
        }
        case 'v':
          return `[=${body}]`;
        default:
          return `[${body}]`;
      }
    })
    .join('');
}
