/**
 * Skills end to end: a real git repository synced into the catalog, then runs of the real Agent SDK in
 * bubblewrap against the model stub. The stub's [[echo-skills]] answers with the skills the agent was
 * offered in its model request, so each test proves the effective set (snapshot, conversation
 * selection, message skill_ids) and nothing else reached the agent, and Bash shows what is on disk.
 */
import { mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { cleanEnv, killLeftovers, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { createGitRepository, type GitRepository, manifest } from '../../hack/git-server.js';
import { type ProvisionedUser, provisionUser, syncEnded, unique } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

let stub: ModelStub;
let root: string;
let t: TestServer;
let key: string;
let user: ProvisionedUser;
let repo: GitRepository;
let repositoryId: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  stub = await startModelStub();
  root = await mkdtemp(path.join(tmpdir(), 'acis-skills-'));
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_ALLOW_FILE_REPOS: '1',
    ACIS_POOL_SIZE: '1',
    ACIS_MAX_SANDBOXES: '4',
  });
  ({ serviceKey: key } = await t.createIntegration('skills e2e'));
  repo = await createGitRepository(root, 'skills', {
    'alpha/SKILL.md': manifest({ name: 'alpha', description: 'Alpha things.' }),
    'alpha/notes.txt': 'alpha notes\n',
    'beta/SKILL.md': manifest({ name: 'beta', description: 'Beta things.' }),
    'nested/gamma/SKILL.md': manifest({ name: 'gamma', description: 'Gamma things.' }),
  });
  const registered = await t.request('POST', '/repositories', { token: key, body: { name: 'skills', repo_url: repo.fileUrl } });
  expect(registered.status).toBe(201);
  repositoryId = registered.body.id;
  await syncReady();
  const listed = await t.request('GET', `/repositories/${registered.body.id}/skills`, { token: key });
  for (const skill of listed.body.data) ids[skill.name] = skill.id;
  expect(Object.keys(ids).sort()).toEqual(['alpha', 'beta', 'gamma']);
  // Exact agent text is asserted, so the filler is off at the tenant.
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
  const attached = await t.request('PUT', `/tenants/${user.tenantId}/repository`, {
    token: key,
    body: { repository_id: registered.body.id },
  });
  expect(attached.status).toBe(200);
});
afterAll(async () => {
  killLeftovers();
  await t?.stop();
  await stub?.stop();
  await rm(root, { recursive: true, force: true });
});

/** Waits until the repository's sync has ended; an error fails the test. */
async function syncReady(): Promise<void> {
  expect((await syncEnded(t, key, repositoryId)).sync.state).toBe('ready');
}

async function newConversation(body: object = {}, userId = user.userId): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: userId, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

/** Sends a message and answers the assistant's reply text. */
async function reply(conversationId: string, body: object): Promise<string> {
  const res = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, { token: key, body });
  expect(res.status, res.text).toBe(201);
  expect(res.body.status).toBe('completed');
  return res.body.content;
}

const runnerOf = (conversationId: string) => t.server.deps.runtime.provider.views().find((r) => r.conversationId === conversationId);

const LIST_SKILLS = '[[tool:Bash {"command":"ls .claude/skills | tr \'\\\\n\' \' \'"}]]';

describe('skills delivered to the agent', () => {
  it('offers the whole snapshot when nothing narrows it, and only those skills (none of the runtime bundled ones)', async () => {
    const conversationId = await newConversation();
    const text = await reply(conversationId, { content: `which skills? ${LIST_SKILLS} [[echo-skills]]` });
    expect(text).toBe('Tool Bash returned: alpha beta gamma\nSkills: alpha, beta, gamma');
  });

  it('narrows by the conversation selection, then by the message skill_ids; the skill directory comes along', async () => {
    const conversationId = await newConversation({ selected_skill_ids: [ids.alpha, ids.gamma] });
    expect(await reply(conversationId, { content: `[[echo-skills]]` })).toBe('Skills: alpha, gamma');
    const narrowed = await reply(conversationId, {
      content: `[[tool:Bash {"command":"ls .claude/skills && cat .claude/skills/alpha/notes.txt"}]] [[echo-skills]]`,
      skill_ids: [ids.alpha],
    });
    expect(narrowed).toBe('Tool Bash returned: alpha\nalpha notes\nSkills: alpha');
    // The next message without skill_ids gets the conversation's set back.
    expect(await reply(conversationId, { content: `${LIST_SKILLS} [[echo-skills]]` })).toBe(
      'Tool Bash returned: alpha gamma\nSkills: alpha, gamma',
    );
  });

  it('a warm session keeps its transcript when a narrower message needs another skill set', async () => {
    const conversationId = await newConversation({ runtime: { mode: 'warm', idle_ttl_seconds: 300 } });
    expect(await reply(conversationId, { content: 'first [[echo-skills]]' })).toBe('Skills: alpha, beta, gamma');
    const second = await reply(conversationId, { content: 'second [[echo-skills]] [[echo-history]]', skill_ids: [ids.beta] });
    expect(second).toBe('Skills: beta\nHistory: 1 earlier user turn: [1] "first [[echo-skills]]"');
    const held = runnerOf(conversationId);
    expect(held?.state).toBe('held');
    // Same set again: the held runner's live session goes on.
    const third = await reply(conversationId, { content: 'third [[echo-skills]]', skill_ids: [ids.beta] });
    expect(third).toBe('Skills: beta');
    expect(runnerOf(conversationId)?.id).toBe(held?.id);
    // Wider again: a fresh runner resumes the transcript and offers the whole set.
    const fourth = await reply(conversationId, { content: 'fourth [[echo-skills]] [[echo-history]]' });
    expect(fourth).toMatch(/^Skills: alpha, beta, gamma\nHistory: 3 earlier user turns: /);
    expect(runnerOf(conversationId)?.id).not.toBe(held?.id);
  });

  it("a role's selected access decides the snapshot", async () => {
    const role = await t.request('POST', `/tenants/${user.tenantId}/roles`, {
      token: key,
      body: { name: unique('beta-only'), skill_access: { mode: 'selected', skill_ids: [ids.beta] } },
    });
    expect(role.status).toBe(201);
    const other = await t.request('PUT', `/tenants/${user.tenantId}/users/by-external-id/${unique('test:user')}`, {
      token: key,
      body: { role_id: role.body.id },
    });
    const conversationId = await newConversation({}, other.body.id);
    expect(await reply(conversationId, { content: `${LIST_SKILLS} [[echo-skills]]` })).toBe('Tool Bash returned: beta\nSkills: beta');
  });

  it('an empty selection offers no skill at all', async () => {
    const conversationId = await newConversation({ selected_skill_ids: [] });
    expect(await reply(conversationId, { content: '[[echo-skills]]' })).toBe('Skills: none.');
  });
});

describe('skill content shared through the database', () => {
  const CAT_NOTES = '[[tool:Bash {"command":"cat .claude/skills/alpha/notes.txt"}]]';

  it('another API process on the same database runs with the skills this one synced, the source gone', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'acis-skills-other-'));
    // No node could fetch the repository now: what the other one delivers comes from the database.
    await rename(repo.dir, `${repo.dir}.away`);
    const other = await serveAcis(
      cleanEnv({
        DATABASE_URL: t.databaseUrl,
        ACIS_MASTER_KEY: t.server.deps.config.masterKey!,
        ACIS_DATA_DIR: dataDir,
        ANTHROPIC_BASE_URL: stub.url,
        ACIS_POOL_SIZE: '0',
      }),
    );
    try {
      const conversationId = await newConversation();
      const res = await fetch(`${other.url}/conversations/${conversationId}/messages?stream=false`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ content: `${CAT_NOTES} [[echo-skills]]` }),
      });
      const body = (await res.json()) as { content: string };
      expect(res.status, JSON.stringify(body)).toBe(201);
      expect(body.content).toBe('Tool Bash returned: alpha notes\nSkills: alpha, beta, gamma');
      expect(await readdir(dataDir)).not.toContain('repositories');
    } finally {
      await stopAcis(other);
      await rename(`${repo.dir}.away`, repo.dir);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('a run in flight keeps the content of the commit it started with while a re-sync lands; the next run gets the new one', async () => {
    const conversationId = await newConversation();
    const agentCalls = () => stub.requests.filter((r) => r.kind === 'agent');
    const before = agentCalls().length;
    // Slow deltas keep the turn's tool call in flight while the re-sync lands.
    const inFlight = reply(conversationId, { content: `[[slow: 2000]] ${CAT_NOTES}` });
    for (let i = 0; i < 600 && agentCalls().length === before; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(agentCalls().length).toBeGreaterThan(before);
    await repo.commit({ 'alpha/notes.txt': 'alpha notes, second edition\n' });
    const resync = await t.request('POST', `/repositories/${repositoryId}/sync`, { token: key });
    expect(resync.status).toBe(202);
    await syncReady();
    const landedAt = Date.now();
    expect(await inFlight).toBe('Tool Bash returned: alpha notes');
    // The tool result reached the model after the re-sync had landed: the run read its files with the new commit current.
    const toolResultCall = agentCalls().slice(before).at(-1)!;
    expect(toolResultCall.at.getTime(), 'the re-sync landed only after the run had used its skill').toBeGreaterThan(landedAt);
    expect(await reply(conversationId, { content: CAT_NOTES })).toBe('Tool Bash returned: alpha notes, second edition');
  });
});
