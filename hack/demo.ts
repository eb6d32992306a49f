/**
 * `npm run demo`: ACIS end to end on this machine with nothing to set up. Starts the model stub in
 * process and ACIS from source in a child process (embedded database in a temporary directory),
 * provisions over REST exactly as a host adapter does (with a skill repository made here with git and
 * synced by the server), then runs a conversation whose agent is offered only its role's skill, calls
 * Bash in its sandbox and remembers the previous turn.
 *
 * With DEMO_URL and DEMO_SERVICE_KEY, a running server is used instead; it must reach the model
 * stub this script starts on 127.0.0.1:DEMO_STUB_PORT (default 8788) through its ANTHROPIC_BASE_URL.
 * Its skill is then registered by hand (the server may not see this machine's files).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ModelStub, startModelStub } from './model-stub/model-stub.js';
import { startAcis } from './demo/acis-process.js';
import { type AcisClient, createAcisClient, unwrap } from '../clients/typescript/src/index.js';
import { DemoError, demoError, step } from './demo/api-client.js';
import { printStream, type StreamSummary } from './demo/stream-view.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_REMOTE_STUB_PORT = 8788;
// The first run starts a sandbox; a wedged run should fail the demo rather than hang it.
const DEMO_TIMEOUT_MS = 180_000;
const SANDBOX_OUTPUT = 'hello from the sandbox';

/** Undo steps, run newest first exactly once: on success, on failure and on Ctrl-C. */
const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;
let interrupted = false;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        console.error('demo: a cleanup step failed:', error);
      }
    }
  })();
  return cleaning;
}
// `on`, not `once`: under `npm run` a Ctrl-C arrives twice (from the terminal and relayed by tsx),
// and a second signal without a handler would end the demo halfway through its cleanup.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (cleaning) return;
    interrupted = true;
    console.error(`\ndemo: ${signal}, cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}
setTimeout(() => {
  console.error(`\ndemo failed: not finished after ${DEMO_TIMEOUT_MS / 1000} s`);
  void cleanup().finally(() => process.exit(1));
}, DEMO_TIMEOUT_MS).unref();

function section(title: string): void {
  console.log(`\n== ${title} ==`);
}

function note(text: string): void {
  console.log(`  ${text}`);
}

interface Target {
  url: string;
  serviceKey: string;
  remote: boolean;
}

async function startStub(remote: boolean): Promise<ModelStub | undefined> {
  if (!remote) return startModelStub();
  const port = Number(process.env.DEMO_STUB_PORT ?? DEFAULT_REMOTE_STUB_PORT);
  try {
    return await startModelStub({ port });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    note(`port ${port} is taken: assuming a model stub (npm run stub) already listens there`);
    return undefined;
  }
}

async function startTarget(stubUrl: string): Promise<Target> {
  const { DEMO_URL: url, DEMO_SERVICE_KEY: serviceKey } = process.env;
  if (url && serviceKey) {
    note(`using the running server at ${url} (DEMO_URL)`);
    note(`hint: it must have been started with ANTHROPIC_BASE_URL=${stubUrl} so its agents reach this stub`);
    return { url: url.replace(/\/+$/, ''), serviceKey, remote: true };
  }
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'acis-demo-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const generatedKey = `sk_int_demo_${randomBytes(18).toString('base64url')}`;
  const acis = await startAcis(ROOT, {
    ACIS_DATA_DIR: dataDir,
    ACIS_BOOTSTRAP_SERVICE_KEY: generatedKey,
    ACIS_ADMIN_TOKEN: `demo-admin-${randomBytes(12).toString('base64url')}`,
    ANTHROPIC_BASE_URL: stubUrl,
    // The demo's skill repository is a local git repository.
    ACIS_ALLOW_FILE_REPOS: '1',
    // Short, so the keepalive pings show up (as dots) in a demo-length run.
    ACIS_PING_INTERVAL_MS: '250',
    LOG_LEVEL: 'warn',
  });
  cleanups.push(() => acis.stop());
  note(`tsx cli/acis.ts serve   pid ${acis.pid}, ${acis.url}`);
  note(`embedded PGlite in ${dataDir} (removed at the end)`);
  note(`bootstrap service key ${generatedKey.slice(0, 16)}… (generated for this run)`);
  return { url: acis.url, serviceKey: generatedKey, remote: false };
}

const SKILLS = {
  'release-notes': 'Drafts release notes from merged changes',
  'incident-review': 'Writes a blameless incident review',
};

/** A git repository with two skills, as a host's skill repository would hold them. */
async function makeSkillRepository(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'acis-demo-skills-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  for (const [name, description] of Object.entries(SKILLS)) {
    await mkdir(path.join(dir, 'skills', name), { recursive: true });
    await writeFile(path.join(dir, 'skills', name, 'SKILL.md'), `---\nname: ${name}\ndescription: ${description}\n---\n\n# ${name}\n`);
  }
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  git('add', '.');
  git('-c', 'user.name=demo', '-c', 'user.email=demo@example.com', 'commit', '-q', '-m', 'skills');
  return `file://${dir}`;
}

/** The repository's release-notes skill: synced from git locally, registered by hand on a remote server. */
async function releaseNotesSkill(acis: AcisClient, repositoryId: string, synced: boolean): Promise<string> {
  const path = { repository_id: repositoryId };
  if (!synced) {
    const manual = await step(
      `POST /repositories/${repositoryId}/skills`,
      acis.api.POST('/repositories/{repository_id}/skills', {
        params: { path },
        body: { name: 'release-notes', description: SKILLS['release-notes'], path: 'skills/release-notes' },
      }),
      [201],
      (skill) => `${skill.id}  ${skill.name} (source ${skill.source})`,
    );
    return manual.body.id;
  }
  let sync = 'pending';
  let skillCount = 0;
  for (let i = 0; i < 100 && (sync === 'pending' || sync === 'syncing'); i++) {
    if (i > 0) await sleep(100);
    const repository = await unwrap(acis.api.GET('/repositories/{repository_id}', { params: { path } })).catch((error: unknown) => {
      throw demoError(`GET /repositories/${repositoryId}`, error);
    });
    sync = repository.sync.state;
    skillCount = repository.skill_count;
  }
  note(`GET /repositories/${repositoryId}  sync ${sync}, ${skillCount} skills`);
  if (sync !== 'ready') throw new DemoError(`the skill repository did not sync (${sync})`);
  const skills = await step(
    `GET /repositories/${repositoryId}/skills`,
    acis.api.GET('/repositories/{repository_id}/skills', { params: { path } }),
    [200],
    (page) => page.data.map((skill) => `${skill.name} (${skill.source}, ${skill.path})`).join(', '),
  );
  const releaseNotes = skills.body.data.find((skill) => skill.name === 'release-notes');
  if (!releaseNotes) throw new DemoError('the synced repository has no release-notes skill');
  return releaseNotes.id;
}

async function provision(acis: AcisClient, run: string, skillRepositoryUrl: string | undefined) {
  const tenantExternalId = `demo:tenant:${run}`;
  const userExternalId = `demo:user:${run}`;
  const upsertTenant = () =>
    acis.api.PUT('/tenants/by-external-id/{external_id}', {
      params: { path: { external_id: tenantExternalId } },
      body: { name: `Demo tenant ${run}` },
    });
  const tenantLabel = `PUT /tenants/by-external-id/${tenantExternalId}`;

  const tenant = await step(tenantLabel, upsertTenant(), [201], (t) => `${t.id}  cold path: created, so set it up`);
  const tenantId = tenant.body.id;
  const repository = await step(
    'POST /repositories',
    acis.api.POST('/repositories', {
      body: { name: `demo-skills-${run}`, repo_url: skillRepositoryUrl ?? 'https://github.com/acme/demo-skills.git' },
    }),
    [201],
    (r) => `${r.id}  ${r.repo_url}, sync ${r.sync.state}`,
  );
  const skillId = await releaseNotesSkill(acis, repository.body.id, skillRepositoryUrl !== undefined);
  await step(
    `PUT /tenants/${tenantId}/repository`,
    acis.api.PUT('/tenants/{tenant_id}/repository', {
      params: { path: { tenant_id: tenantId } },
      body: { repository_id: repository.body.id },
    }),
    [200],
    (t) => `tenant ${t.id} now uses repository ${t.repository_id}`,
  );
  const role = await step(
    `POST /tenants/${tenantId}/roles`,
    acis.api.POST('/tenants/{tenant_id}/roles', {
      params: { path: { tenant_id: tenantId } },
      body: { name: 'analyst', skill_access: { mode: 'selected', skill_ids: [skillId] } },
    }),
    [201],
    (r) => `${r.id}  ${r.name}, skills: ${r.skill_access.mode === 'selected' ? r.skill_access.skill_ids.join(', ') : r.skill_access.mode}`,
  );
  const user = await step(
    `PUT /tenants/${tenantId}/users/by-external-id/${userExternalId}`,
    acis.api.PUT('/tenants/{tenant_id}/users/by-external-id/{external_id}', {
      params: { path: { tenant_id: tenantId, external_id: userExternalId } },
      body: { email: 'ada@example.com', display_name: 'Ada', role_id: role.body.id },
    }),
    [201],
    (u) => `${u.id}  ${u.email}`,
  );
  await step(tenantLabel, upsertTenant(), [200], (t) => `${t.id}  warm path: exists, setup skipped`);
  const token = await step(
    'POST /auth/token-exchange',
    acis.api.POST('/auth/token-exchange', { body: { tenant_external_id: tenantExternalId, user_external_id: userExternalId } }),
    [200],
    (t) => `${t.token.slice(0, 20)}…  expires ${t.expires_at}`,
  );
  return { userId: user.body.id, jwt: token.body.token };
}

function requireSuccess(what: string, run: StreamSummary, remote: boolean): void {
  const terminal = run.terminal;
  if (!terminal) throw new DemoError(`${what}: the stream ended without a terminal line`);
  if (terminal.type !== 'result' || terminal.subtype !== 'success') {
    throw new DemoError(`${what}: the run did not succeed (${terminal.type}/${terminal.subtype ?? terminal.problem?.detail})`);
  }
  if (terminal.is_error) {
    const hint = remote ? ' (does the server reach the model stub? see the hint at the top)' : '';
    throw new DemoError(`${what}: the agent reported an error: ${String(terminal.result ?? '').slice(0, 200)}${hint}`);
  }
}

function requireText(what: string, run: StreamSummary, expected: string, remote: boolean): void {
  if (run.text.includes(expected)) return;
  const hint = remote ? ' (is the server using this model stub? see the hint at the top)' : '';
  throw new DemoError(`${what}: expected the reply to contain ${JSON.stringify(expected)}${hint}`);
}

async function main(): Promise<void> {
  const remote = Boolean(process.env.DEMO_URL || process.env.DEMO_SERVICE_KEY);
  if (remote && !(process.env.DEMO_URL && process.env.DEMO_SERVICE_KEY)) {
    throw new DemoError('set both DEMO_URL and DEMO_SERVICE_KEY to use a running server, or neither');
  }
  const run = randomBytes(3).toString('hex');

  section('1. Model stub (stands in for the model vendor, offline and deterministic)');
  const stub = await startStub(remote);
  if (stub) cleanups.push(() => stub.stop());
  const stubUrl = stub?.url ?? `http://127.0.0.1:${process.env.DEMO_STUB_PORT ?? DEFAULT_REMOTE_STUB_PORT}`;
  note(`listening on ${stubUrl}`);

  section('2. ACIS server');
  const target = await startTarget(stubUrl);
  const acis = createAcisClient({ baseUrl: target.url, token: target.serviceKey });

  section('3. Provisioning, as a host adapter does it (integration service key)');
  const { jwt } = await provision(acis, run, target.remote ? undefined : await makeSkillRepository());
  const asUser = acis.asUser(jwt);

  section("4. A conversation with an initial message (the user's platform JWT, streamed as NDJSON)");
  const firstPrompt = `Please check the sandbox. [[tool:Bash {"command":"echo ${SANDBOX_OUTPUT}"}]] [[echo-skills]]`;
  note(`POST /conversations  initial_message: ${firstPrompt}`);
  const created = asUser.startConversation({ title: 'Demo conversation', initial_message: { content: firstPrompt } });
  const first = await printStream(created).catch((error: unknown) => {
    throw demoError('POST /conversations', error);
  });
  const conversationId = created.conversationId;
  if (!conversationId) throw new DemoError('POST /conversations: no X-Service-Conversation-Id header');
  note(`conversation ${conversationId}, message ${created.messageId}`);
  requireSuccess('first message', first, target.remote);
  requireText('first message', first, `Tool Bash returned: ${SANDBOX_OUTPUT}`, target.remote);
  // The role grants one of the repository's two skills: the agent is offered that one only.
  if (!target.remote) requireText('first message', first, 'Skills: release-notes', target.remote);

  section('5. A second message: the agent remembers the first turn');
  const secondPrompt = 'What did I ask you before? [[echo-history]]';
  note(`POST /conversations/${conversationId}/messages  content: ${secondPrompt}`);
  const sent = asUser.sendMessage(conversationId, { content: secondPrompt });
  const second = await printStream(sent).catch((error: unknown) => {
    throw demoError(`POST /conversations/${conversationId}/messages`, error);
  });
  note(`message ${sent.messageId}`);
  requireSuccess('second message', second, target.remote);
  requireText('second message', second, 'History: 1 earlier user turn', target.remote);

  section('6. The message history (oldest first)');
  const history = await step(
    `GET /conversations/${conversationId}/messages`,
    asUser.api.GET('/conversations/{conversation_id}/messages', { params: { path: { conversation_id: conversationId } } }),
    [200],
    (page) => `${page.data.length} messages`,
  );
  for (const message of [...history.body.data].reverse()) {
    const content = message.content.replace(/\s+/g, ' ');
    const usage = message.usage ? `  (${message.usage.input_tokens} in / ${message.usage.output_tokens} out)` : '';
    note(
      `${message.id}  ${message.role.padEnd(9)} ${message.status.padEnd(9)} ${content.length > 90 ? `${content.slice(0, 89)}…` : content}${usage}`,
    );
  }
  if (history.body.data.length !== 4) throw new DemoError(`expected 4 messages in the history, found ${history.body.data.length}`);

  section('Done');
  if (stub) {
    const kinds: Record<string, number> = {};
    for (const r of stub.requests) kinds[r.kind] = (kinds[r.kind] ?? 0) + 1;
    note(
      `the model stub answered ${stub.requests.length} requests: ${Object.entries(kinds)
        .map(([kind, n]) => `${n} ${kind}`)
        .join(', ')}`,
    );
  }
  note(target.remote ? 'the running server is left as it was (the demo tenant stays)' : 'stopping ACIS and removing its data directory');
}

main().then(
  async () => {
    await cleanup();
    process.exit(0);
  },
  async (error: unknown) => {
    // After Ctrl-C the stopping server fails the run in flight; that is not news, the signal handler exits.
    if (interrupted) return;
    console.error(`\ndemo failed: ${error instanceof DemoError ? error.message : ((error as Error).stack ?? String(error))}`);
    await cleanup();
    process.exit(1);
  },
);
