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

/**
 * Paths kept as text, their elements joined by NUL (which no element holds: field names are
 * validated, and keys and values are JSON, which escapes it), so the set operations are those of a
 * plain Set and a prefix is a prefix of the text.
 */
const SEPARATOR = '\0';

function text(path: FieldPath): string {
  return path.join(SEPARATOR);
}

function under(member: string, prefix: string): boolean {
  return member === prefix || member.startsWith(prefix + SEPARATOR);
}

export class FieldSet {
  private readonly paths: Set<string>;

  constructor(paths: Iterable<string> = []) {
    this.paths = new Set(paths);
  }

  static of(paths: Iterable<FieldPath>): FieldSet {
    return new FieldSet([...paths].map(text));
  }

  insert(path: FieldPath): void {
    this.paths.add(text(path));
  }

  has(path: FieldPath): boolean {
    return this.paths.has(text(path));
  }

  get empty(): boolean {
    return this.paths.size === 0;
  }

  list(): FieldPath[] {
    return [...this.paths].map((member) => member.split(SEPARATOR));
  }

  union(other: FieldSet): FieldSet {
    return new FieldSet([...this.paths, ...other.paths]);
  }

  /** This set itself when nothing of it is in `other` (so an unchanged owner keeps its encoding). */
  difference(other: FieldSet): FieldSet {
    if (other.empty) return this;
    const kept = [...this.paths].filter((path) => !other.paths.has(path));
    return kept.length === this.paths.size ? this : new FieldSet(kept);
  }

  intersection(other: FieldSet): FieldSet {
    return new FieldSet([...this.paths].filter((path) => other.paths.has(path)));
  }

  /** Without the paths under (or at) any of `prefixes`. */
  without(prefixes: FieldPath[]): FieldSet {
    const texts = prefixes.map(text);
    return new FieldSet([...this.paths].filter((member) => !texts.some((prefix) => under(member, prefix))));
  }

  /** Only the paths under (or at) `prefix`. */
  within(prefix: FieldPath): FieldSet {
    const prefixText = text(prefix);
    return new FieldSet([...this.paths].filter((member) => under(member, prefixText)));
  }

  /** Whether this set holds `path` or anything under it. */
  touches(path: FieldPath): boolean {
    const prefixText = text(path);
    for (const member of this.paths) if (under(member, prefixText)) return true;
    return false;
  }
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

/** Decoded sets by their FieldsV1 text: every write decodes every entry of the object it changes. */
const decoded = new Map<string, FieldSet>();
const DECODED_KEPT = 2000;

export function decodeFieldsV1(tree: unknown): FieldSet {
  const key = JSON.stringify(tree);
  const known = decoded.get(key);
  if (known) return known;
  const set = walkFieldsV1(tree);
  if (decoded.size >= DECODED_KEPT) decoded.delete(decoded.keys().next().value!);
  decoded.set(key, set);
  return set;
}

function walkFieldsV1(tree: unknown): FieldSet {
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
