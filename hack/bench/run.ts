import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CASE_IDS } from './conversations-report.js';
import { runConversationsPlane, selectedCases } from './conversations.js';
import { runControllerPlane } from './controller-plane.js';
import { createDatabase, dropDatabase } from './databases.js';
import { runKubernetesPlane } from './kubernetes-plane.js';
import { runLinkPlane } from './link-plane.js';
import { stopAllLoad } from './load.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { runProvisioningPlane } from './provisioning-plane.js';
import { selectedScenarios } from './scenarios.js';
import { runSkillsPlane } from './skills.js';

/**
 * `npm run bench`: the planes BENCH_PLANES picks, one after the other, each on its own servers:
 * provisioning (provisioning-plane.ts: the provisioning routes against their floors on a fresh
 * PostgreSQL database), conversations (conversations.ts: against the Agent SDK driven directly),
 * controller (controller-plane.ts: against the Kubernetes API test server), kubernetes
 * (kubernetes-plane.ts: the conversation plane under the kubernetes provider beside the local one),
 * skills (skills.ts: skill content from the database, push to next run) and link (link-plane.ts: the
 * runner link over TLS against a bare TLS handshake and against stdio).
 * Environment: BENCH_PLANES (provisioning | conversations | controller | kubernetes | skills | link | all,
 * the default), BENCH_ADMIN_DATABASE_URL (databases.ts), and each plane's own, listed in its file
 * (BENCH_SCENARIOS selects in the provisioning and conversation planes).
 * `npm run bench -- --list` prints what those settings select and runs nothing.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT_DIR = path.join(ROOT, '.data/bench');

/** Undo steps, run newest first exactly once: on success, on failure and on Ctrl-C. */
const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        console.error('bench: cleanup step failed:', error);
      }
    }
  })();
  return cleaning;
}
let interrupted = false;

const PLANES = ['provisioning', 'conversations', 'controller', 'kubernetes', 'skills', 'link'] as const;
type Plane = (typeof PLANES)[number];

function planes(): Plane[] {
  const raw = process.env.BENCH_PLANES ?? 'all';
  if (raw === 'all') return [...PLANES];
  if ((PLANES as readonly string[]).includes(raw)) return [raw as Plane];
  throw new Error(`BENCH_PLANES must be one of ${PLANES.join(', ')}, all`);
}

const context: PlaneContext = {
  root: ROOT,
  outDir: OUT_DIR,
  newDatabase: async () => {
    const url = await createDatabase();
    cleanups.push(() => dropDatabase(url));
    return url;
  },
  defer: (step) => cleanups.push(step),
  interrupted: () => interrupted,
};

const RUN_PLANE: Record<Plane, (ctx: PlaneContext) => Promise<PlaneResult>> = {
  provisioning: runProvisioningPlane,
  conversations: runConversationsPlane,
  controller: runControllerPlane,
  kubernetes: runKubernetesPlane,
  skills: runSkillsPlane,
  link: runLinkPlane,
};

async function main(): Promise<number> {
  const outcomes: PlaneResult[] = [];
  for (const plane of planes()) {
    if (interrupted) throw new Error('interrupted');
    outcomes.push(await RUN_PLANE[plane](context));
  }
  for (const outcome of outcomes) console.log(outcome.markdown);
  console.error(
    `bench: written ${outcomes
      .flatMap((o) => o.files)
      .map((f) => path.relative(ROOT, f))
      .join(', ')}`,
  );
  const failures = outcomes.flatMap((o) => o.failures);
  for (const failure of failures) console.error(`bench: FAILED ${failure}`);
  return failures.length > 0 ? 1 : 0;
}

/** `--list`: the planes, provisioning scenarios and conversation cases the environment selects. */
function list(): void {
  const selected = planes();
  console.log(`planes: ${selected.join(', ')}`);
  if (selected.includes('provisioning')) {
    console.log(
      `provisioning scenarios: ${selectedScenarios()
        .map((s) => s.id)
        .join(', ')}`,
    );
  }
  if (selected.includes('conversations')) {
    const cases = selectedCases();
    console.log(`conversation cases: ${(cases ? [...cases] : CASE_IDS).join(', ')}`);
  }
}

if (process.argv.includes('--list')) {
  try {
    list();
  } catch (error) {
    console.error(`bench: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  }
} else {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`bench: ${signal}, stopping`);
      interrupted = true;
      stopAllLoad();
      void cleanup().finally(() => process.exit(130));
    });
  }
  main()
    .catch((error: unknown) => {
      if (!interrupted) console.error('bench: aborted:', error);
      return 1;
    })
    .then(async (code) => {
      await cleanup();
      process.exit(interrupted ? 130 : code);
    });
}
