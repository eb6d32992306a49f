/**
 * The controller's contract (`controller/api/`: CRD types, labels, pod readiness, how a Sandbox's
 * status is read, the admission order) is what the API server may import of the controller, so it
 * imports only packages, the Kubernetes toolkit (`kube/`), the pure policy (`sandbox-policy/`) and
 * itself. The policy, shared by the local provider and the controller, imports nothing of the project.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Relative module specifiers of a file's imports and re-exports (static and dynamic), resolved. */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]+)['"]/g)].map((match) => match[1]!);
  return specifiers.map((specifier) => path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'));
}

const within = (folder: string) => (target: string) => target.startsWith(`${path.join(ROOT, folder)}${path.sep}`);

describe.each([
  ['controller/api', ['controller/api', 'kube', 'sandbox-policy']],
  ['sandbox-policy', ['sandbox-policy']],
])('%s', (folder, allowed) => {
  const files = sources(path.join(ROOT, folder));

  it('has files to check', () => {
    expect(files.length).toBeGreaterThan(2);
  });

  it.each(files.map((file) => [path.relative(ROOT, file), file]))(`%s imports only ${allowed.join(', ')}`, (_name, file) => {
    const outside = relativeImports(file).filter((target) => !allowed.some((root) => within(root)(target)));
    expect(outside.map((target) => path.relative(ROOT, target))).toEqual([]);
  });
});
