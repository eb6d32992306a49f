import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncEnded as waitForSync } from '../helpers/provision.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;
let db: pg.Client;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('repositories suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db.end();
  await t.stop();
});

// Nothing listens on port 9 of the loopback: the sync every registration starts fails at once
// (`host unreachable`), wherever the suite runs. test/integration/repository-sync.test.ts syncs real repositories.
const URL = 'https://git.example.com/acme/skills.git';
let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;
const pointers = (res: ApiResponse) => res.body.errors.map((e: { pointer: string }) => e.pointer).sort();
const idsOf = (res: ApiResponse) => res.body.data.map((x: { id: string }) => x.id);

function createRepository(body: Record<string, unknown>, token = key) {
  return t.request('POST', '/repositories', { token, body: { name: unique('repo'), repo_url: URL, ...body } });
}

async function createCredential(token = key): Promise<string> {
  const res = await t.request('POST', '/credentials', { token, body: { name: unique('cred'), secret: 'pat' } });
  expect(res.status).toBe(201);
  return res.body.id;
}

function createSkill(repositoryId: string, body: Record<string, unknown>, token = key) {
  return t.request('POST', `/repositories/${repositoryId}/skills`, { token, body });
}

async function repositoryCount(token = key): Promise<number> {
  return (await t.request('GET', '/repositories?limit=100', { token })).body.data.length;
}

const syncEnded = (id: string) => waitForSync(t, key, id);

const registrationSyncEnded = new Set<string>();

/**
 * Puts a repository into a given sync state directly, once the sync its registration started has
 * ended (so it cannot overwrite the state afterwards).
 */
async function setSync(id: string, state: string, error: string | null, lastSyncedAt: Date | null) {
  if (!registrationSyncEnded.has(id)) await syncEnded(id);
  registrationSyncEnded.add(id);
  await db.query('update repositories set sync_state = $2, sync_error = $3, sync_last_synced_at = $4 where id = $1', [
    id,
    state,
    error,
    lastSyncedAt,
  ]);
}

describe('POST /repositories', () => {
  it('registers a repository with defaults: branch main, provider generic, sync pending, no skills; its sync starts at once', async () => {
    const res = await t.request('POST', '/repositories', { token: key, body: { name: '  Skills  ', repo_url: ` ${URL} ` } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      object: 'repository',
      id: expect.stringMatching(/^rep_[A-Za-z0-9]+$/),
      name: 'Skills',
      repo_url: URL,
      branch: 'main',
      provider: 'generic',
      credential_id: null,
      sync: { state: 'pending', last_synced_at: null, error: null },
      skill_count: 0,
      metadata: {},
      created_at: res.body.created_at,
      updated_at: res.body.created_at,
    });
    const row = (await db.query('select * from repositories where id = $1', [res.body.id])).rows[0];
    expect(row).toMatchObject({ name: 'Skills', branch: 'main' });
    // The scan started at registration ends; here, with nothing listening, in error with the reason.
    const ended = await syncEnded(res.body.id);
    expect(ended).toEqual({
      ...res.body,
      sync: { state: 'error', last_synced_at: null, error: expect.stringMatching(/^host unreachable/) },
    });
  });

  it('stores every provided field, with a credential of the same integration', async () => {
    const credentialId = await createCredential();
    const res = await createRepository({
      branch: ' release/v2 ',
      provider: 'gitlab',
      credential_id: credentialId,
      metadata: { owner: 'platform' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      branch: 'release/v2',
      provider: 'gitlab',
      credential_id: credentialId,
      metadata: { owner: 'platform' },
    });
    for (const provider of ['github', 'gitlab', 'bitbucket', 'azure_devops', 'generic']) {
      expect((await createRepository({ provider })).body.provider).toBe(provider);
    }
    expect((await createRepository({ credential_id: null })).body.credential_id).toBeNull();
  });

  it('accepts https and ssh URLs and scp-like remotes', async () => {
    for (const repoUrl of [
      'https://github.com/acme/skills.git',
      'ssh://git@github.com:22/acme/skills.git',
      'git@github.com:acme/skills.git',
      'git@gitlab.example.com:/srv/git/skills.git',
    ]) {
      const res = await createRepository({ repo_url: repoUrl });
      expect(res.status, repoUrl).toBe(201);
      expect(res.body.repo_url).toBe(repoUrl);
    }
  });

  it('refuses other remotes, embedded credentials and file:// (when not enabled) with 422 /repo_url', async () => {
    const before = await repositoryCount();
    for (const repoUrl of [
      '',
      'not a url',
      'ftp://example.org/repo.git',
      'https://github.com',
      'https://github.com/',
      'https://user:token@github.com/acme/skills.git',
      'https://ghp_token@github.com/acme/skills.git',
      'ssh://git:password@github.com/acme/skills.git',
      'ext::sh -c touch% /tmp/pwned',
      'ext::touch%20/tmp/pwned',
      'git@host:-oProxyCommand=touch',
      '-oProxyCommand=x:repo',
      'github.com:acme/skills',
      'javascript:alert(1)',
      '/srv/git/skills',
      './skills',
      'file:///srv/git/skills',
      `https://github.com/${'a'.repeat(2030)}`,
    ]) {
      const res = await createRepository({ repo_url: repoUrl });
      expect(res.status, repoUrl).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res), repoUrl).toEqual(['/repo_url']);
    }
    expect((await createRepository({ repo_url: undefined })).status).toBe(422);
    expect(await repositoryCount()).toBe(before);
  });

  it('accepts file:// remotes only where the deployment enables them', async () => {
    const enabled = await startTestServer({ ACIS_ALLOW_FILE_REPOS: '1' });
    try {
      const { serviceKey } = await enabled.createIntegration();
      const ok = await enabled.request('POST', '/repositories', {
        token: serviceKey,
        body: { name: 'local', repo_url: 'file:///srv/git/skills' },
      });
      expect(ok.status).toBe(201);
      expect(ok.body.repo_url).toBe('file:///srv/git/skills');
      const remoteHost = await enabled.request('POST', '/repositories', {
        token: serviceKey,
        body: { name: 'remote-file', repo_url: 'file://server/share/skills' },
      });
      expect(remoteHost.status).toBe(422);
      expect(pointers(remoteHost)).toEqual(['/repo_url']);
    } finally {
      await enabled.stop();
    }
  });

  it('refuses remotes on loopback, link-local, private and metadata addresses, and plain http:// and git://, with 422 /repo_url', async () => {
    const before = await repositoryCount();
    for (const repoUrl of [
      'https://127.0.0.1/acme/skills.git',
      'https://localhost:8443/acme/skills.git',
      'https://[::1]/acme/skills.git',
      'https://[::ffff:10.0.0.5]/acme/skills.git',
      'https://0x7f.1/acme/skills.git',
      'ssh://git@10.1.2.3/acme/skills.git',
      'git@192.168.1.10:acme/skills.git',
      'git@[fd00::1]:acme/skills.git',
      'https://169.254.169.254/latest/meta-data',
      'https://metadata.google.internal/computeMetadata',
      'https://100.64.0.1/acme/skills.git',
      'http://gitea.example.com:3000/acme/skills',
      'git://git.example.org/skills.git',
    ]) {
      const res = await createRepository({ repo_url: repoUrl });
      expect(res.status, repoUrl).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res), repoUrl).toEqual(['/repo_url']);
      expect(res.body.errors[0].message, repoUrl).toMatch(/refused|not enabled/);
    }
    expect(await repositoryCount()).toBe(before);
  });

  it('accepts private hosts ACIS_REPOSITORY_ALLOW lists and plain remotes with ACIS_ALLOW_PLAIN_REPOS, never metadata', async () => {
    const allowing = await startTestServer({
      ACIS_REPOSITORY_ALLOW: 'git.internal.test,10.1.2.3:22,localhost',
      ACIS_ALLOW_PLAIN_REPOS: '1',
    });
    try {
      const { serviceKey } = await allowing.createIntegration();
      const create = (repoUrl: string) =>
        allowing.request('POST', '/repositories', { token: serviceKey, body: { name: unique('allowed'), repo_url: repoUrl } });
      for (const repoUrl of [
        'ssh://git@10.1.2.3/acme/skills.git',
        'https://localhost:8443/acme/skills.git',
        'http://gitea.example.com:3000/acme/skills',
        'git://git.example.org/skills.git',
      ]) {
        expect((await create(repoUrl)).status, repoUrl).toBe(201);
      }
      for (const repoUrl of ['https://10.1.2.3/acme/skills.git', 'https://169.254.169.254/x.git', 'https://127.0.0.1/x.git']) {
        const res = await create(repoUrl);
        expect(res.status, repoUrl).toBe(422);
        expect(pointers(res)).toEqual(['/repo_url']);
      }
      expect((await allowing.request('GET', '/readyz')).body.sandbox_weakened_by).toEqual([
        expect.stringMatching(/^ACIS_ALLOW_PLAIN_REPOS=1: /),
        expect.stringMatching(/^ACIS_REPOSITORY_ALLOW: /),
      ]);
    } finally {
      await allowing.stop();
    }
  });

  it('validates branch as a git ref name of 1..255 characters', async () => {
    const longest = await createRepository({ branch: 'b'.repeat(255) });
    expect(longest.status).toBe(201);
    expect(longest.body.branch).toHaveLength(255);
    for (const branch of ['b'.repeat(256), '', '   ', 'a..b', '-x', 'a b', 'a~1', 'a:b', 'a.lock', 'feature/', '.hidden', '@', 'a@{1}']) {
      const res = await createRepository({ branch });
      expect(res.status, branch).toBe(422);
      expect(pointers(res), branch).toEqual(['/branch']);
    }
  });

  it('validates name, provider and metadata with JSON pointers and changes nothing', async () => {
    const before = await repositoryCount();
    const longest = await createRepository({ name: ` ${'r'.repeat(255)} ` });
    expect(longest.status).toBe(201);
    expect(longest.body.name).toHaveLength(255);
    const cases: [Record<string, unknown>, string[]][] = [
      [{ name: 'r'.repeat(256) }, ['/name']],
      [{ name: undefined }, ['/name']],
      [{ name: '  ' }, ['/name']],
      [{ provider: 'sourcehut' }, ['/provider']],
      [{ metadata: { a: 1 } }, ['/metadata/a']],
      [{ credential_id: '' }, ['/credential_id']],
      [{ name: 'r'.repeat(256), provider: 'x', branch: '..' }, ['/branch', '/name', '/provider']],
    ];
    for (const [body, expected] of cases) {
      const res = await createRepository(body);
      expect(res.status, JSON.stringify(body).slice(0, 60)).toBe(422);
      expect(pointers(res)).toEqual(expected);
    }
    expect(await repositoryCount()).toBe(before + 1);
  });

  it('refuses a credential that is unknown or of another integration (422 /credential_id)', async () => {
    const before = await repositoryCount();
    const foreign = await createCredential(otherKey);
    for (const credentialId of ['crd_unknown', foreign]) {
      const res = await createRepository({ credential_id: credentialId });
      expect(res.status).toBe(422);
      expect(pointers(res)).toEqual(['/credential_id']);
    }
    // Both semantic problems are reported at once.
    const both = await createRepository({ credential_id: 'crd_unknown', repo_url: 'file:///srv/x' });
    expect(pointers(both)).toEqual(['/credential_id', '/repo_url']);
    expect(await repositoryCount()).toBe(before);
  });

  it('refuses a taken name with 409 name-conflict naming the holder; other integrations may use it', async () => {
    const name = unique('taken');
    const first = await createRepository({ name });
    const second = await createRepository({ name: `  ${name}`, repo_url: 'git@github.com:other/repo.git' });
    expect(second.status).toBe(409);
    expect(problemSlug(second)).toBe('name-conflict');
    expect(second.body.conflicting_resource_id).toBe(first.body.id);
    expect((await createRepository({ name }, otherKey)).status).toBe(201);
  });

  it('replays with the same Idempotency-Key and refuses the key with another payload', async () => {
    const headers = { 'Idempotency-Key': unique('register') };
    const body = { name: unique('idem'), repo_url: URL };
    const first = await t.request('POST', '/repositories', { token: key, headers, body });
    expect(first.status).toBe(201);
    const replay = await t.request('POST', '/repositories', { token: key, headers, body });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const other = await t.request('POST', '/repositories', { token: key, headers, body: { ...body, branch: 'dev' } });
    expect(other.status).toBe(409);
    expect(problemSlug(other)).toBe('idempotency-key-conflict');
    const stored = await db.query('select count(*)::int as n from repositories where name = $1', [body.name]);
    expect(stored.rows[0].n).toBe(1);
  });

  it('needs a service key', async () => {
    const res = await t.request('POST', '/repositories', { body: { name: 'x', repo_url: URL } });
    expect(res.status).toBe(401);
    expect(problemSlug(res)).toBe('insufficient-scope');
  });
});

describe('GET /repositories', () => {
  it('pages newest first, forwards and backwards, with skill counts', async () => {
    const { serviceKey } = await t.createIntegration('repository paging');
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await createRepository({ name: `page-${i}` }, serviceKey)).body.id);
    await createSkill(ids[24]!, { name: 'one' }, serviceKey);
    await createSkill(ids[24]!, { name: 'two' }, serviceKey);
    const newestFirst = [...ids].reverse();
    const list = (query: string) => t.request('GET', `/repositories?${query}`, { token: serviceKey });

    const page1 = await list('limit=10');
    expect(idsOf(page1)).toEqual(newestFirst.slice(0, 10));
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
    expect(page1.body.data.map((r: { skill_count: number }) => r.skill_count)).toEqual([2, ...Array(9).fill(0)]);
    const page2 = await list(`limit=10&starting_after=${page1.body.next_cursor}`);
    expect(idsOf(page2)).toEqual(newestFirst.slice(10, 20));
    const page3 = await list(`limit=10&starting_after=${page2.body.next_cursor}`);
    expect(idsOf(page3)).toEqual(newestFirst.slice(20));
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    const back = await list(`limit=5&ending_before=${page2.body.data[0].id}`);
    expect(idsOf(back)).toEqual(newestFirst.slice(5, 10));
    expect(back.body.has_more).toBe(true);
    expect(idsOf(await list(''))).toHaveLength(20);
  });

  it('answers 400 for both cursors or a bad limit', async () => {
    for (const query of ['starting_after=rep_a&ending_before=rep_b', 'limit=0', 'limit=101']) {
      const res = await t.request('GET', `/repositories?${query}`, { token: key });
      expect(res.status, query).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
  });
});

describe('PATCH /repositories/{repository_id}', () => {
  it('merges name and metadata (wholesale) without touching sync; a no-op writes nothing', async () => {
    const repo = await createRepository({ metadata: { a: '1', b: '2' } });
    const synced = new Date('2026-01-02T03:04:05.000Z');
    await setSync(repo.body.id, 'error', 'clone failed', synced);
    t.clock.advance(1000);
    const res = await t.request('PATCH', `/repositories/${repo.body.id}`, {
      token: key,
      body: { name: ` ${unique('renamed')} `, metadata: { c: '3' } },
    });
    expect(res.status).toBe(200);
    expect(res.body.name).toMatch(/^renamed-\d+$/);
    expect(res.body.metadata).toEqual({ c: '3' });
    expect(res.body.sync).toEqual({ state: 'error', last_synced_at: synced.toISOString(), error: 'clone failed' });
    expect(res.body.updated_at > repo.body.updated_at).toBe(true);
    expect((await t.request('GET', `/repositories/${repo.body.id}`, { token: key })).body).toEqual(res.body);

    t.clock.advance(1000);
    const same = await t.request('PATCH', `/repositories/${repo.body.id}`, {
      token: key,
      body: { name: res.body.name, branch: 'main', credential_id: null, metadata: { c: '3' } },
    });
    expect(same.body).toEqual(res.body);
    const empty = await t.request('PATCH', `/repositories/${repo.body.id}`, { token: key, body: {} });
    expect(empty.body).toEqual(res.body);
  });

  it('sets sync back to pending (keeping last_synced_at) when branch or credential_id changes', async () => {
    const credentialId = await createCredential();
    const repo = await createRepository({});
    const synced = new Date('2026-02-03T04:05:06.000Z');
    const patch = (body: Record<string, unknown>) => t.request('PATCH', `/repositories/${repo.body.id}`, { token: key, body });

    await setSync(repo.body.id, 'error', 'auth failed', synced);
    const branch = await patch({ branch: 'develop' });
    expect(branch.status).toBe(200);
    expect(branch.body).toMatchObject({ branch: 'develop', sync: { state: 'pending', last_synced_at: synced.toISOString(), error: null } });

    await setSync(repo.body.id, 'ready', null, synced);
    const credential = await patch({ credential_id: credentialId });
    expect(credential.body).toMatchObject({ credential_id: credentialId, sync: { state: 'pending' } });

    await setSync(repo.body.id, 'ready', null, synced);
    const cleared = await patch({ credential_id: null });
    expect(cleared.body).toMatchObject({ credential_id: null, sync: { state: 'pending', last_synced_at: synced.toISOString() } });

    await setSync(repo.body.id, 'ready', null, synced);
    const metadataOnly = await patch({ metadata: { x: 'y' }, branch: 'develop' });
    expect(metadataOnly.body.sync.state).toBe('ready');
    const row = (await db.query('select sync_state from repositories where id = $1', [repo.body.id])).rows[0];
    expect(row.sync_state).toBe('ready');
  });

  it('refuses a taken name (409), a bad credential or branch (422) and changes nothing', async () => {
    const holder = await createRepository({});
    const repo = await createRepository({});
    const before = await syncEnded(repo.body.id);
    const foreign = await createCredential(otherKey);
    const patch = (body: Record<string, unknown>) => t.request('PATCH', `/repositories/${repo.body.id}`, { token: key, body });

    const taken = await patch({ name: holder.body.name });
    expect(taken.status).toBe(409);
    expect(problemSlug(taken)).toBe('name-conflict');
    expect(taken.body.conflicting_resource_id).toBe(holder.body.id);
    for (const credentialId of ['crd_unknown', foreign]) {
      const res = await patch({ credential_id: credentialId, branch: 'other' });
      expect(res.status).toBe(422);
      expect(pointers(res)).toEqual(['/credential_id']);
    }
    for (const [body, expected] of [
      [{ branch: 'a..b' }, ['/branch']],
      [{ name: 'n'.repeat(256) }, ['/name']],
      [{ name: null }, ['/name']],
      [{ metadata: null }, ['/metadata']],
    ] as const) {
      const res = await patch(body);
      expect(res.status, JSON.stringify(body).slice(0, 40)).toBe(422);
      expect(pointers(res)).toEqual(expected);
    }
    expect((await t.request('GET', `/repositories/${repo.body.id}`, { token: key })).body).toEqual(before);
    expect((await t.request('PATCH', '/repositories/rep_unknown', { token: key, body: {} })).status).toBe(404);
  });
});

describe('DELETE /repositories/{repository_id}', () => {
  it('deletes a repository with its skills (204); afterwards 404 everywhere', async () => {
    const repo = await createRepository({});
    await createSkill(repo.body.id, { name: 'doomed' });
    const deleted = await t.request('DELETE', `/repositories/${repo.body.id}`, { token: key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    for (const [method, path] of [
      ['GET', `/repositories/${repo.body.id}`],
      ['DELETE', `/repositories/${repo.body.id}`],
      ['GET', `/repositories/${repo.body.id}/skills`],
    ] as const) {
      const res = await t.request(method, path, { token: key });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    const skills = await db.query('select count(*)::int as n from skills where repository_id = $1', [repo.body.id]);
    expect(skills.rows[0].n).toBe(0);
  });

  it('refuses while a tenant has it attached (409 resource-in-use naming the tenant)', async () => {
    const repo = await createRepository({});
    const tenant = await t.request('POST', '/tenants', { token: key, body: { name: unique('tenant') } });
    const attached = await t.request('PUT', `/tenants/${tenant.body.id}/repository`, {
      token: key,
      body: { repository_id: repo.body.id },
    });
    expect(attached.status).toBe(200);
    const refused = await t.request('DELETE', `/repositories/${repo.body.id}`, { token: key });
    expect(refused.status).toBe(409);
    expect(problemSlug(refused)).toBe('resource-in-use');
    expect(refused.body.conflicting_resource_id).toBe(tenant.body.id);
    expect((await t.request('GET', `/repositories/${repo.body.id}`, { token: key })).status).toBe(200);

    expect((await t.request('DELETE', `/tenants/${tenant.body.id}/repository`, { token: key })).status).toBe(200);
    expect((await t.request('DELETE', `/repositories/${repo.body.id}`, { token: key })).status).toBe(204);
  });

  it('refuses while a role pins it (409 resource-in-use naming the role)', async () => {
    const repo = await createRepository({});
    const skill = await createSkill(repo.body.id, { name: 'pinned' });
    const tenant = await t.request('POST', '/tenants', { token: key, body: { name: unique('tenant') } });
    await t.request('PUT', `/tenants/${tenant.body.id}/repository`, { token: key, body: { repository_id: repo.body.id } });
    // `selected` skill access pins the role to the tenant's repository of the moment.
    const role = await t.request('POST', `/tenants/${tenant.body.id}/roles`, {
      token: key,
      body: { name: 'pinned', skill_access: { mode: 'selected', skill_ids: [skill.body.id] } },
    });
    expect(role.status).toBe(201);
    await t.request('DELETE', `/tenants/${tenant.body.id}/repository`, { token: key });

    const refused = await t.request('DELETE', `/repositories/${repo.body.id}`, { token: key });
    expect(refused.status).toBe(409);
    expect(problemSlug(refused)).toBe('resource-in-use');
    expect(refused.body.conflicting_resource_id).toBe(role.body.id);

    expect((await t.request('DELETE', `/roles/${role.body.id}`, { token: key })).status).toBe(204);
    expect((await t.request('DELETE', `/repositories/${repo.body.id}`, { token: key })).status).toBe(204);
  });
});

describe('POST /repositories/{repository_id}/skills', () => {
  it('registers a manual skill and counts it on the repository', async () => {
    const repo = await createRepository({});
    const res = await createSkill(repo.body.id, {
      name: 'pdf-forms',
      description: 'Fill PDF forms',
      version: ' 1.2.0 ',
      path: 'skills/pdf-forms/SKILL.md',
      metadata: { owner: 'docs' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      object: 'skill',
      id: expect.stringMatching(/^skl_[A-Za-z0-9]+$/),
      repository_id: repo.body.id,
      name: 'pdf-forms',
      description: 'Fill PDF forms',
      version: '1.2.0',
      path: 'skills/pdf-forms/SKILL.md',
      source: 'manual',
      metadata: { owner: 'docs' },
      created_at: res.body.created_at,
      updated_at: res.body.created_at,
    });
    const minimal = await createSkill(repo.body.id, { name: 'bare', description: null });
    expect(minimal.body).toMatchObject({ description: null, version: null, path: null, metadata: {}, source: 'manual' });
    expect((await t.request('GET', `/repositories/${repo.body.id}`, { token: key })).body.skill_count).toBe(2);
    const list = await t.request('GET', `/repositories/${repo.body.id}/skills`, { token: key });
    expect(list.body.data).toEqual([minimal.body, res.body]);
  });

  it('enforces the skill name slug: at most 128 characters, ^[a-z0-9][a-z0-9-]*$', async () => {
    const repo = await createRepository({});
    for (const name of ['a', '0', 'a--b', 'x-', 's'.repeat(128)]) {
      const res = await createSkill(repo.body.id, { name });
      expect(res.status, name).toBe(201);
      expect(res.body.name).toBe(name);
    }
    for (const name of ['s'.repeat(129), '', '-lead', 'Upper', 'snake_case', 'sp ace', ' pad', 'dot.ted', 'ümlaut', 42]) {
      const res = await createSkill(repo.body.id, { name });
      expect(res.status, String(name)).toBe(422);
      expect(pointers(res)).toEqual(['/name']);
    }
    const list = await t.request('GET', `/repositories/${repo.body.id}/skills?limit=100`, { token: key });
    expect(list.body.data).toHaveLength(5);
  });

  it('validates description, version, path and metadata', async () => {
    const repo = await createRepository({});
    for (const [body, expected] of [
      [{ path: '../outside/SKILL.md' }, ['/path']],
      [{ path: 'skills/../../x' }, ['/path']],
      [{ path: '/etc/passwd' }, ['/path']],
      [{ path: 'a\\b' }, ['/path']],
      [{ path: 'p'.repeat(1025) }, ['/path']],
      [{ version: '' }, ['/version']],
      [{ version: 'v'.repeat(256) }, ['/version']],
      [{ description: 'd'.repeat(4097) }, ['/description']],
      [{ description: 7 }, ['/description']],
      [{ metadata: { k: 'v'.repeat(501) } }, ['/metadata/k']],
    ] as const) {
      const res = await createSkill(repo.body.id, { name: 'ok', ...body });
      expect(res.status, JSON.stringify(body).slice(0, 40)).toBe(422);
      expect(pointers(res)).toEqual(expected);
    }
    const atLimits = await createSkill(repo.body.id, {
      name: 'limits',
      description: 'd'.repeat(4096),
      version: 'v'.repeat(255),
      path: `${'p'.repeat(1020)}/x.md`.slice(-1024),
    });
    expect(atLimits.status).toBe(201);
    expect((await t.request('GET', `/repositories/${repo.body.id}`, { token: key })).body.skill_count).toBe(1);
  });

  it('refuses a taken name in the repository (409 naming the holder); other repositories may use it', async () => {
    const repo = await createRepository({});
    const first = await createSkill(repo.body.id, { name: 'dup' });
    const second = await createSkill(repo.body.id, { name: 'dup', description: 'another' });
    expect(second.status).toBe(409);
    expect(problemSlug(second)).toBe('name-conflict');
    expect(second.body.conflicting_resource_id).toBe(first.body.id);
    const elsewhere = await createSkill((await createRepository({})).body.id, { name: 'dup' });
    expect(elsewhere.status).toBe(201);
  });

  it('replays with the same Idempotency-Key', async () => {
    const repo = await createRepository({});
    const headers = { 'Idempotency-Key': unique('skill') };
    const path = `/repositories/${repo.body.id}/skills`;
    const first = await t.request('POST', path, { token: key, headers, body: { name: 'idem' } });
    const replay = await t.request('POST', path, { token: key, headers, body: { name: 'idem' } });
    expect(first.status).toBe(201);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const conflict = await t.request('POST', path, { token: key, headers, body: { name: 'other' } });
    expect(problemSlug(conflict)).toBe('idempotency-key-conflict');
  });

  it('answers 404 for an unknown repository', async () => {
    const res = await createSkill('rep_unknown', { name: 'x' });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');
  });
});

describe('GET /repositories/{repository_id}/skills', () => {
  it('pages newest first, forwards and backwards', async () => {
    const repo = await createRepository({});
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await createSkill(repo.body.id, { name: `skill-${i}` })).body.id);
    const newestFirst = [...ids].reverse();
    const list = (query: string) => t.request('GET', `/repositories/${repo.body.id}/skills?${query}`, { token: key });
    const page1 = await list('limit=10');
    expect(idsOf(page1)).toEqual(newestFirst.slice(0, 10));
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
    const page2 = await list(`limit=10&starting_after=${page1.body.next_cursor}`);
    expect(idsOf(page2)).toEqual(newestFirst.slice(10, 20));
    const page3 = await list(`limit=10&starting_after=${page2.body.next_cursor}`);
    expect(idsOf(page3)).toEqual(newestFirst.slice(20));
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    const back = await list(`limit=5&ending_before=${page2.body.data[0].id}`);
    expect(idsOf(back)).toEqual(newestFirst.slice(5, 10));
    expect(idsOf(await list(''))).toEqual(newestFirst.slice(0, 20));
    for (const query of ['limit=0', 'limit=101', 'starting_after=skl_a&ending_before=skl_b']) {
      expect((await list(query)).status, query).toBe(400);
    }
  });
});

describe('integration isolation', () => {
  it('hides repositories and their skills from another integration behind 404, never 403', async () => {
    const repo = await createRepository({});
    await createSkill(repo.body.id, { name: 'private' });
    const id = repo.body.id;
    for (const [method, path, body] of [
      ['GET', `/repositories/${id}`, undefined],
      ['PATCH', `/repositories/${id}`, { name: 'hijack' }],
      ['DELETE', `/repositories/${id}`, undefined],
      ['GET', `/repositories/${id}/skills`, undefined],
      ['POST', `/repositories/${id}/skills`, { name: 'intruder' }],
    ] as const) {
      const res = await t.request(method, path, { token: otherKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    const theirs = await t.request('GET', '/repositories?limit=100', { token: otherKey });
    expect(idsOf(theirs)).not.toContain(id);
    const mine = await t.request('GET', `/repositories/${id}`, { token: key });
    expect(mine.body).toMatchObject({ name: repo.body.name, skill_count: 1 });
    // Another integration cannot attach it to its tenants either.
    const { rootTenantId: _root, serviceKey } = await t.createIntegration('attacher');
    const tenant = await t.request('POST', '/tenants', { token: serviceKey, body: { name: 'x' } });
    const attach = await t.request('PUT', `/tenants/${tenant.body.id}/repository`, { token: serviceKey, body: { repository_id: id } });
    expect(attach.status).toBe(422);
  });
});
