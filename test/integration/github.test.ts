/**
 * GitHub: a `github_app` credential syncs through an installation token minted from a local stand-in
 * of GitHub's REST endpoint (the App JWT is verified there) against a git server that accepts only
 * that token; push webhooks signed with the integration's webhook secret queue syncs. Deliveries
 * signed wrong, unsigned, replayed, for another branch or an already synced commit change nothing.
 * The App's private key, the installation token and the webhook secret are canaries searched for in
 * every response, the logs and a dump of every table.
 */
import { createHmac, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGitRepository, type GitHttpServer, type GitRepository, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { type GitHubStub, startGitHubStub } from '../helpers/github-stub.js';
import { syncEnded, unique } from '../helpers/provision.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

const APP_ID = '424242';
const INSTALLATION_ID = '9001';
const TOKEN = `ghs_${randomBytes(18).toString('hex')}`;
const WEBHOOK_SECRET = `whsec-${randomBytes(16).toString('hex')}`;
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PRIVATE_KEY_PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
// A line from the middle of the key: distinctive, and what a leak of any part of it would contain.
const KEY_CANARY = PRIVATE_KEY_PEM.split('\n')[5]!;

let root: string;
let git: GitHttpServer;
let github: GitHubStub;
let t: TestServer;
let key: string;
let db: pg.Client;
let appCredentialId: string;
const responses: ApiResponse[] = [];

async function request(method: string, urlPath: string, body?: unknown): Promise<ApiResponse> {
  const res = await t.request(method, urlPath, { token: key, ...(body !== undefined && { body }) });
  responses.push(res);
  return res;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'acis-test-github-'));
  github = await startGitHubStub({ appId: APP_ID, publicKey, installations: { [INSTALLATION_ID]: TOKEN } });
  git = await serveGitOverHttp(root, { username: 'x-access-token', password: TOKEN });
  t = await startTestServer({ ACIS_GITHUB_API_URL: github.url, ACIS_ALLOW_PLAIN_REPOS: '1', ACIS_REPOSITORY_ALLOW: '127.0.0.1' });
  ({ serviceKey: key } = await t.createIntegration('github'));
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
  const app = await request('POST', '/credentials', {
    name: 'github-app',
    type: 'github_app',
    secret: JSON.stringify({ app_id: APP_ID, installation_id: INSTALLATION_ID, private_key: PRIVATE_KEY_PEM }),
  });
  expect(app.status, app.text).toBe(201);
  appCredentialId = app.body.id;
  const hook = await request('POST', '/credentials', { name: 'github-webhook', type: 'github_webhook_secret', secret: WEBHOOK_SECRET });
  expect(hook.status, hook.text).toBe(201);
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
  await git?.stop();
  await github?.stop();
  await rm(root, { recursive: true, force: true });
});

const SKILLS = { 'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDF files.' }) };

const settled = (repositoryId: string) => syncEnded(t, key, repositoryId);

async function registered(
  files: Record<string, string> = SKILLS,
  branch = 'main',
): Promise<{ repo: GitRepository; id: string; cloneUrl: string }> {
  const repo = await createGitRepository(root, unique('gh'), files);
  const cloneUrl = `${git.url(path.basename(repo.dir))}.git`;
  // Registered without `.git`: the webhook matches either spelling.
  const res = await request('POST', '/repositories', {
    name: unique('repo'),
    repo_url: git.url(path.basename(repo.dir)),
    branch,
    provider: 'github',
    credential_id: appCredentialId,
  });
  expect(res.status, res.text).toBe(201);
  const synced = await settled(res.body.id);
  expect(synced.sync, JSON.stringify(synced.sync)).toMatchObject({ state: 'ready' });
  return { repo, id: res.body.id, cloneUrl };
}

interface Delivery {
  event?: string;
  /** null: no X-GitHub-Delivery header. */
  id?: string | null;
  body: unknown;
  secret?: string | null;
}

/** POSTs a delivery as GitHub does: the raw JSON body, signed with HMAC-SHA256 of the secret. */
async function deliver({
  event = 'push',
  id = randomBytes(8).toString('hex'),
  body,
  secret = WEBHOOK_SECRET,
}: Delivery): Promise<ApiResponse> {
  const raw = JSON.stringify(body);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-github-event': event,
    'user-agent': 'GitHub-Hookshot/test',
  };
  if (id !== null) headers['x-github-delivery'] = id;
  if (secret !== null) headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
  const res = await t.request('POST', '/webhooks/github', { headers, rawBody: raw });
  responses.push(res);
  return res;
}

const pushOf = (cloneUrl: string, after: string, ref = 'refs/heads/main') => ({
  ref,
  before: '0'.repeat(40),
  after,
  deleted: false,
  repository: {
    full_name: 'acme/skills',
    clone_url: cloneUrl,
    html_url: cloneUrl.replace(/\.git$/, ''),
    pushed_at: Math.floor(Date.now() / 1000),
  },
  pusher: { name: 'someone' },
});

const count = async (sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows[0].n as number;

describe('github_app credentials', () => {
  it('refuses a github_app secret that is not {app_id, installation_id, private_key}, without echoing it', async () => {
    const secret = JSON.stringify({ app_id: 'x', private_key: 'not a key' });
    const res = await request('POST', '/credentials', { name: unique('bad-app'), type: 'github_app', secret });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.errors.every((e: { pointer: string }) => e.pointer === '/secret')).toBe(true);
    expect(res.text).not.toContain('not a key');
  });

  it('syncs a GitHub repository with an installation token minted for the sync, for that repository alone and read-only', async () => {
    const before = github.requests.length;
    const { id, repo } = await registered();
    const skills = await request('GET', `/repositories/${id}/skills`);
    expect(skills.body.data.map((s: { name: string }) => s.name)).toEqual(['pdf']);
    expect(github.requests.slice(before)).toEqual([
      {
        method: 'POST',
        path: `/app/installations/${INSTALLATION_ID}/access_tokens`,
        status: 201,
        body: { repositories: [path.basename(repo.dir)], permissions: { contents: 'read' } },
      },
    ]);
    // git authenticated with the token as x-access-token, the way GitHub expects it.
    expect(git.requests.filter((r) => r.authorization).every((r) => r.user === 'x-access-token')).toBe(true);
  });

  it('an installation the App does not have ends the sync in error with a reason', async () => {
    const wrong = await request('POST', '/credentials', {
      name: unique('other-installation'),
      type: 'github_app',
      secret: JSON.stringify({ app_id: APP_ID, installation_id: '77', private_key: PRIVATE_KEY_PEM }),
    });
    const repo = await createGitRepository(root, unique('gh-missing'), SKILLS);
    const res = await request('POST', '/repositories', {
      name: unique('repo'),
      repo_url: git.url(path.basename(repo.dir)),
      provider: 'github',
      credential_id: wrong.body.id,
    });
    const failed = await settled(res.body.id);
    expect(failed.sync).toMatchObject({ state: 'error', error: expect.stringMatching(/^GitHub App installation not found/) });
  });

  it('a github_app credential on a repository of another provider fails the sync saying so', async () => {
    const repo = await createGitRepository(root, unique('gh-generic'), SKILLS);
    const res = await request('POST', '/repositories', {
      name: unique('repo'),
      repo_url: git.url(path.basename(repo.dir)),
      credential_id: appCredentialId,
    });
    const failed = await settled(res.body.id);
    expect(failed.sync.error).toBe('a github_app credential needs a repository with provider github');
  });
});

describe('POST /webhooks/github', () => {
  it('a signed push queues the sync: the new skill is cataloged; a redelivery runs once', async () => {
    const { repo, id, cloneUrl } = await registered();
    const after = await repo.commit({ 'skills/csv/SKILL.md': manifest({ name: 'csv', description: 'Reads CSV files.' }) });
    const deliveryId = randomBytes(8).toString('hex');
    // A redelivery is the same bytes: GitHub sends the stored payload again.
    const push = pushOf(cloneUrl, after);
    const res = await deliver({ id: deliveryId, body: push });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({
      object: 'webhook_delivery',
      delivery_id: deliveryId,
      event: 'push',
      outcome: 'queued',
      syncs_queued: 1,
    });
    await settled(id);
    expect((await request('GET', `/repositories/${id}/sync`)).body.commit).toBe(after);
    expect((await request('GET', `/repositories/${id}/skills`)).body.data.map((s: { name: string }) => s.name).sort()).toEqual([
      'csv',
      'pdf',
    ]);

    const tokensBefore = github.requests.length;
    const again = await deliver({ id: deliveryId, body: push });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ outcome: 'duplicate', syncs_queued: 0 });
    expect((await request('GET', `/repositories/${id}`)).body.sync.state).toBe('ready');
    expect(github.requests.length).toBe(tokensBefore);
  });

  it('a captured push replayed under another delivery id, or without one, queues nothing; nor does a push older than a week', async () => {
    const { repo, id, cloneUrl } = await registered();
    const after = await repo.commit({ 'skills/replay/SKILL.md': manifest({ name: 'replay', description: 'Replayed.' }) });
    const captured = pushOf(cloneUrl, after);
    expect((await deliver({ body: captured })).body).toMatchObject({ outcome: 'queued', syncs_queued: 1 });
    await settled(id);
    // Another push moves the repository on, so a replay of the captured one would otherwise sync again.
    const next = await repo.commit({ 'skills/replay/more.md': 'more\n' });
    expect((await deliver({ body: pushOf(cloneUrl, next) })).body).toMatchObject({ outcome: 'queued' });
    await settled(id);
    for (const replayId of [randomBytes(8).toString('hex'), null]) {
      const replay = await deliver({ id: replayId, body: captured });
      expect(replay.status).toBe(200);
      expect(replay.body).toMatchObject({ outcome: 'duplicate', syncs_queued: 0 });
    }
    const weekOld = { ...captured, repository: { ...captured.repository, pushed_at: Math.floor(Date.now() / 1000) - 8 * 24 * 3600 } };
    const { pushed_at: _dropped, ...withoutTime } = captured.repository;
    for (const body of [weekOld, { ...captured, repository: withoutTime }]) {
      const stale = await deliver({ body });
      expect(stale.status).toBe(200);
      expect(stale.body).toMatchObject({ outcome: 'ignored', syncs_queued: 0 });
      expect(stale.body.detail).toContain('replay window');
    }
    expect((await request('GET', `/repositories/${id}/sync`)).body.commit).toBe(next);
    expect((await request('GET', `/repositories/${id}`)).body.sync.state).toBe('ready');
  });

  it("a wrong, a missing or another integration's signature is 401 and changes nothing", async () => {
    const { repo, id, cloneUrl } = await registered();
    const after = await repo.commit({ 'skills/pdf/notes.md': 'notes\n' });
    const deliveries = await count('select count(*)::int as n from webhook_deliveries');
    const synced = (await request('GET', `/repositories/${id}`)).body.sync.last_synced_at;
    for (const secret of ['not-the-secret', null]) {
      const res = await deliver({ body: pushOf(cloneUrl, after), secret });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(problemSlug(res)).toBe('webhook-signature-invalid');
    }
    // The secret of an integration with no repository at this URL does not verify either.
    const { serviceKey: otherKey } = await t.createIntegration('github other');
    const otherSecret = `whsec-${randomBytes(8).toString('hex')}`;
    await t.request('POST', '/credentials', {
      token: otherKey,
      body: { name: 'hook', type: 'github_webhook_secret', secret: otherSecret },
    });
    expect((await deliver({ body: pushOf(cloneUrl, after), secret: otherSecret })).status).toBe(401);
    // A body altered after signing.
    const raw = JSON.stringify(pushOf(cloneUrl, after));
    const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('hex')}`;
    const tampered = await t.request('POST', '/webhooks/github', {
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': 'tampered',
        'x-hub-signature-256': signature,
      },
      rawBody: raw.replace('someone', 'someone else'),
    });
    expect(tampered.status).toBe(401);
    expect(await count('select count(*)::int as n from webhook_deliveries')).toBe(deliveries);
    const after401 = (await request('GET', `/repositories/${id}`)).body.sync;
    expect(after401).toMatchObject({ state: 'ready', last_synced_at: synced });
  });

  it('ignores pushes to another branch, tags and branch deletions, and a push of the commit already synced', async () => {
    const { repo, id, cloneUrl } = await registered();
    const current = (await request('GET', `/repositories/${id}/sync`)).body.commit;
    const other = await repo.commit({ 'skills/pdf/other.md': 'x\n' }, 'feature');
    const cases = [
      { body: pushOf(cloneUrl, other, 'refs/heads/feature'), outcome: 'ignored' },
      { body: pushOf(cloneUrl, other, 'refs/tags/v1'), outcome: 'ignored' },
      { body: { ...pushOf(cloneUrl, '0'.repeat(40)), deleted: true }, outcome: 'ignored' },
      { body: pushOf(cloneUrl, current), outcome: 'up_to_date' },
      { event: 'issues', body: pushOf(cloneUrl, other), outcome: 'ignored' },
      { event: 'ping', body: { zen: 'Keep it logically awesome.', repository: { clone_url: cloneUrl } }, outcome: 'pong' },
    ];
    for (const { event, body, outcome } of cases) {
      const res = await deliver({ ...(event && { event }), body });
      expect(res.status, `${outcome}: ${res.text}`).toBe(200);
      expect(res.body).toMatchObject({ outcome, syncs_queued: 0 });
    }
    expect((await request('GET', `/repositories/${id}`)).body.sync.state).toBe('ready');
  });

  it('a push while a sync is in flight runs one more sync after it, which lands the pushed commit', async () => {
    const { repo, id, cloneUrl } = await registered();
    const release = git.hold();
    // Each sync starts with one ref advertisement of the repository on the git server.
    const name = path.basename(repo.dir);
    const fetchesBefore = git.requests.length;
    const syncsSeen = () => git.requests.slice(fetchesBefore).filter((r) => r.path === `/${name}/info/refs` && r.user !== undefined).length;
    try {
      expect((await request('POST', `/repositories/${id}/sync`)).status).toBe(202);
      await git.held(name);
      const after = await repo.commit({ 'skills/late/SKILL.md': manifest({ name: 'late', description: 'Pushed mid-sync.' }) });
      const res = await deliver({ body: pushOf(cloneUrl, after) });
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ outcome: 'queued', syncs_queued: 1 });
      release();
      // Two syncs in a row, each a git fetch: on a loaded machine that can take a while.
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const details = (await request('GET', `/repositories/${id}/sync`)).body;
        // The first sync may already land the pushed commit (its fetch was held until after the push):
        // done only once the queued sync has also run (it fetched, and the state is ready again).
        if (syncsSeen() >= 2 && details.state === 'ready' && details.commit === after) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      // On failure, the server's log lines about this repository say which sync was still running and why.
      const syncLog = t.logs.filter((line) => line.includes(id)).join('');
      expect(syncsSeen(), syncLog).toBe(2);
      expect((await request('GET', `/repositories/${id}/sync`)).body, syncLog).toMatchObject({ state: 'ready', commit: after });
    } finally {
      release();
      await settled(id);
    }
  }, 90_000);
});

describe('canaries', () => {
  it('the private key, the installation token and the webhook secret are in no response, log line or table', async () => {
    const tables = await db.query(`select table_name from information_schema.tables where table_schema = 'public'`);
    let dump = '';
    for (const { table_name } of tables.rows) {
      const rows = await db.query(`select * from "${table_name}"`);
      dump += JSON.stringify(rows.rows);
    }
    const everything = [dump, t.logs.join(''), ...responses.map((r) => `${r.text}${JSON.stringify([...r.headers])}`)].join('\n');
    expect(responses.length).toBeGreaterThan(10);
    for (const canary of [KEY_CANARY, TOKEN, WEBHOOK_SECRET]) expect(everything).not.toContain(canary);
  });
});
