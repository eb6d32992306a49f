/**
 * The walls between components, as docs/architecture.md draws them: `kube/` is a Kubernetes toolkit
 * that knows nothing of ACIS; `controller/api/` is the contract between the API server and the
 * controller (CRD types, labels, how a status is read, the admission order); the API server imports
 * nothing else of the controller, the controller nothing of the API server; the runner, the egress
 * proxy and the sandbox policy stand alone; `cli/` is the one place that puts the processes together;
 * the developer scripts in `hack/` do not lean on the tests. And no import circle anywhere.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';
import { importCircles, importGraph, type ImportGraph, sources } from '../helpers/import-graph.js';

/** What each folder may import, besides itself; the longest matching folder decides. */
const MAY_IMPORT: Record<string, string[]> = {
  kube: [],
  'controller/api': ['kube', 'sandbox-policy'],
  // The egress proxy owns the placeholder grammar and the model key's alias a runner pod is given.
  controller: ['controller/api', 'kube', 'sandbox-policy', 'egress-proxy'],
  'api-server': ['controller/api', 'kube', 'sandbox-policy', 'runner', 'egress-proxy'],
  runner: [],
  'egress-proxy': [],
  'sandbox-policy': [],
  // The client stands alone: its types are generated from the OpenAPI document, not imported.
  clients: [],
  cli: ['api-server', 'controller', 'controller/api', 'egress-proxy', 'kube', 'runner', 'sandbox-policy'],
  hack: ['api-server', 'controller', 'controller/api', 'egress-proxy', 'kube', 'runner', 'sandbox-policy', 'cli', 'clients'],
};
const FOLDERS = Object.keys(MAY_IMPORT).sort((a, b) => b.length - a.length);

/** The folder of MAY_IMPORT a file belongs to (the longest that contains it), or undefined. */
function folderOf(root: string, file: string): string | undefined {
  const relative = path.relative(root, file).split(path.sep).join('/');
  return FOLDERS.find((folder) => relative.startsWith(`${folder}/`));
}

/** Every import that crosses a wall: `from → to` with both relative to the root. */
function wallBreaches(root: string, graph: ImportGraph): string[] {
  const breaches: string[] = [];
  for (const [file, targets] of graph) {
    const from = folderOf(root, file);
    if (!from) continue;
    for (const target of targets) {
      const to = folderOf(root, target) ?? path.relative(root, target).split(path.sep)[0]!;
      if (to !== from && !MAY_IMPORT[from]!.includes(to)) breaches.push(`${path.relative(root, file)} → ${path.relative(root, target)}`);
    }
  }
  return breaches;
}

function treeGraph(root: string): ImportGraph {
  const tops = [...new Set(FOLDERS.map((folder) => folder.split('/')[0]!))]
    .map((top) => path.join(root, top))
    .filter((dir) => existsSync(dir));
  return importGraph(tops.flatMap((dir) => sources(dir)));
}

describe('import rules', () => {
  const graph = treeGraph(ROOT);

  it('reads the whole tree', () => {
    expect(graph.size).toBeGreaterThan(200);
  });

  it('no import crosses a wall', () => {
    expect(wallBreaches(ROOT, graph)).toEqual([]);
  });

  it('no import circle', () => {
    const circles = importCircles(graph).map((circle) => circle.map((file) => path.relative(ROOT, file)));
    expect(circles).toEqual([]);
  });
});

describe('the import-rule check on a planted tree', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'acis-import-rules-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const plant = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };
  plant('kube/informer.ts', "import { LABELS } from '../controller/api/v1alpha1.js';\n");
  plant('controller/api/v1alpha1.ts', 'export const LABELS = {};\n');
  plant('controller/reconciler.ts', "import { startServer } from '../api-server/server.js';\n");
  plant('api-server/server.ts', "import { decide } from '../controller/decisions.js';\nexport const startServer = 1;\n");
  plant(
    'api-server/sandboxes/provider.ts',
    "import { LABELS } from '../../controller/api/v1alpha1.js';\nimport type { Deps } from '../deps.js';\n",
  );
  plant('api-server/deps.ts', "import type { Provider } from './sandboxes/provider.js';\n");
  plant('controller/decisions.ts', 'export const decide = 1;\n');
  plant('hack/bench/run.ts', "import { helper } from '../../test/helpers/x.js';\n");
  const planted = treeGraph(root);

  it('finds each planted breach and nothing else', () => {
    expect(wallBreaches(root, planted).sort()).toEqual([
      'api-server/server.ts → controller/decisions.ts',
      'controller/reconciler.ts → api-server/server.ts',
      'hack/bench/run.ts → test/helpers/x.ts',
      'kube/informer.ts → controller/api/v1alpha1.ts',
    ]);
  });

  it('finds the planted circle, type-only imports included', () => {
    expect(importCircles(planted).map((circle) => circle.map((file) => path.relative(root, file)))).toEqual([
      ['api-server/deps.ts', 'api-server/sandboxes/provider.ts'],
    ]);
  });
});
