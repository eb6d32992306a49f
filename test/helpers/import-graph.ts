/**
 * The project's import graph as the import-rule tests read it: every relative module specifier of a
 * file's imports and re-exports (static, dynamic and type-only alike: a type-only import still ties
 * two modules' meanings together), resolved to the `.ts` file it names.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export type ImportGraph = Map<string, string[]>;

/** The `.ts` files under `dir`, recursively. */
export function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The files a file imports by relative specifier, as absolute `.ts` paths. */
export function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g)].map((match) => match[1]!);
  return specifiers.map((specifier) => path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'));
}

export function importGraph(files: string[]): ImportGraph {
  return new Map(files.map((file) => [file, relativeImports(file)]));
}

/**
 * The import circles of a graph: its strongly connected components of more than one file, or a
 * file importing itself (Tarjan's algorithm), each as a sorted list of files.
 */
export function importCircles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const circles: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles;
}
