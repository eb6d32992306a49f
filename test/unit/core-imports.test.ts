/**
 * `api-server/core/` is the bottom layer: shared plumbing that every resource module uses and that
 * uses none of them. Its files may import packages, Node's modules, each other and the process
 * configuration (`api-server/config.ts`), nothing else of the project.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';

const CORE = path.join(ROOT, 'api-server', 'core');
const ALLOWED_OUTSIDE = new Set([path.join(ROOT, 'api-server', 'config.ts')]);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Relative module specifiers of a file's imports and re-exports (static and dynamic). */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g)].map((match) => match[1]!);
  return specifiers.map((specifier) => path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'));
}

describe('api-server/core', () => {
  const files = sources(CORE);

  it('has files to check', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it.each(files.map((file) => [path.relative(ROOT, file), file]))('%s imports no feature module', (_name, file) => {
    const outside = relativeImports(file).filter((target) => !target.startsWith(`${CORE}${path.sep}`) && !ALLOWED_OUTSIDE.has(target));
    expect(outside.map((target) => path.relative(ROOT, target))).toEqual([]);
  });

  it('the check sees a feature import when there is one', () => {
    const probe = path.join(CORE, 'probe.ts');
    const resolved = path.resolve(path.dirname(probe), '../runs/follow.js').replace(/\.js$/, '.ts');
    expect(resolved.startsWith(`${CORE}${path.sep}`)).toBe(false);
    expect(ALLOWED_OUTSIDE.has(resolved)).toBe(false);
  });
});
