/**
 * Repository sync against real git repositories made by the test: served over smart HTTP
 * (`git http-backend` behind basic auth), over SSH (a real sshd) and as `file://`. Asserts the sync
 * states, the skill catalog it reconciles, the reasons of failed syncs, and that credentials appear
 * nowhere.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunSkills, wireSkills } from '../../api-server/skills/materialise.js';
import { writeSkills } from '../../runner/workspace-ops.js';
import { commandLines } from '../helpers/acis-process.js';
import { createGitRepository, type GitHttpServer, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { syncEnded, unique } from '../helpers/provision.js';
import { startSshServer } from '../helpers/ssh-server.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

const TOKEN = `ghp_${'s3cr3tT0ken'.repeat(3)}`;
/** The test's git servers are on this machine, over plain HTTP and SSH, and some repositories are local paths. */
const LOCAL_REMOTES = { ACIS_ALLOW_FILE_REPOS: '1', ACIS_ALLOW_PLAIN_REPOS: '1', ACIS_REPOSITORY_ALLOW: '127.0.0.1' };

let root: string;
let git: GitHttpServer;
let t: TestServer;
let key: string;
let db: pg.Client;
let credentialId: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'acis-test-repos-'));
  git = await serveGitOverHttp(root, { password: TOKEN });
  t = await startTestServer({ ...LOCAL_REMOTES });
  ({ serviceKey: key } = await t.createIntegration('repository sync'));
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
  const credential = await t.request('POST', '/credentials', { token: key, body: { name: 'git-token', type: 'git_pat', secret: TOKEN } });
  expect(credential.status).toBe(201);
  credentialId = credential.body.id;
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
  await git?.stop();
  await rm(root, { recursive: true, force: true });
});

const SKILLS = {
  'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDF files.', version: '1.0' }),
  'skills/pdf/reference.md': 'How to read PDFs.\n',
  'skills/csv/SKILL.md': manifest({ name: 'csv', description: 'Reads CSV files.' }),
  'README.md': '# skills\n',
};

async function register(body: Record<string, unknown>): Promise<ApiResponse> {
  const res = await t.request('POST', '/repositories', { token: key, body: { name: unique('repo'), ...body } });
  expect(res.status, res.text).toBe(201);
  return res;
}

const settled = (repositoryId: string) => syncEnded(t, key, repositoryId);

async function skills(repositoryId: string): Promise<any[]> {
  const res = await t.request('GET', `/repositories/${repositoryId}/skills?limit=100`, { token: key });
  expect(res.status).toBe(200);
  return res.body.data;
}

const byName = (list: any[]) => Object.fromEntries(list.map((s) => [s.name, s]));

async function resync(repositoryId: string): Promise<any> {
  const res = await t.request('POST', `/repositories/${repositoryId}/sync`, { token: key });
  expect(res.status, res.text).toBe(202);
  expect(res.body.sync).toEqual({ state: 'syncing', last_synced_at: expect.anything(), error: null });
  return settled(repositoryId);
}

describe('POST /repositories: the first sync', () => {
  it('starts at registration (pending, then syncing, then ready) and catalogs every SKILL.md over authenticated HTTP', async () => {
    const repo = await createGitRepository(root, unique('http'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId, provider: 'github' });
    expect(res.body.sync).toEqual({ state: 'pending', last_synced_at: null, error: null });
    const ready = await settled(res.body.id);
    expect(ready.sync).toEqual({ state: 'ready', last_synced_at: expect.any(String), error: null });
    expect(ready.skill_count).toBe(2);
    const found = byName(await skills(res.body.id));
    expect(found.pdf).toMatchObject({
      object: 'skill',
      repository_id: res.body.id,
      description: 'Reads PDF files.',
      version: '1.0',
      path: 'skills/pdf/SKILL.md',
      source: 'discovered',
      metadata: {},
    });
    expect(found.csv).toMatchObject({ version: null, path: 'skills/csv/SKILL.md', source: 'discovered' });
    expect(found.pdf.id).toMatch(/^skl_/);

    // The token went in a basic-auth header after the server asked for it, never in the URL.
    const fetched = git.requests.filter((r) => r.path.startsWith(`/${path.basename(repo.dir)}/`));
    expect(fetched.some((r) => r.user !== undefined)).toBe(true);
    expect(JSON.stringify(fetched)).not.toContain(TOKEN);

    const details = await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key });
    expect(details.status).toBe(200);
    expect(details.body).toMatchObject({
      object: 'repository.sync',
      repository_id: res.body.id,
      state: 'ready',
      error: null,
      warnings: [],
    });
    expect(details.body.commit).toMatch(/^[0-9a-f]{40}$/);
  });

  it('stores the skill directories of the synced commit in the database and keeps no checkout on disk', async () => {
    const repo = await createGitRepository(root, unique('kept'), SKILLS);
    const head = await repo.commit({ 'skills/csv/notes.md': 'csv notes\n', 'skills/csv/run.sh': '#!/bin/sh\necho hi\n' });
    await chmod(path.join(repo.dir, 'skills/csv/run.sh'), 0o755);
    const head2 = await repo.commit({});
    expect(head2).not.toBe(head);
    const res = await register({ repo_url: repo.fileUrl });
    await settled(res.body.id);
    const details = (await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key })).body;
    expect(details.commit).toBe(head2);
    const files = await db.query(
      `select f.skill_dir, f.path, f.executable, convert_from(b.data, 'UTF8') as text
         from skill_files f join content_blobs b on b.digest = f.digest
        where f.repository_id = $1 and f.commit = $2 order by 1, 2`,
      [res.body.id, head2],
    );
    // The skill directories only (not README.md at the root), with their modes.
    expect(files.rows.map((r) => `${r.skill_dir}:${r.path}:${r.executable ? 'x' : '-'}`)).toEqual([
      'skills/csv:SKILL.md:-',
      'skills/csv:notes.md:-',
      'skills/csv:run.sh:x',
      'skills/pdf:SKILL.md:-',
      'skills/pdf:reference.md:-',
    ]);
    expect(files.rows.find((r) => r.path === 'notes.md').text).toBe('csv notes\n');
    expect(await readdir(path.join(t.server.deps.config.dataDir, 'repositories', res.body.id))).toEqual(['git']);
  });

  it('keeps the content of the synced commit and the one before, collects older ones, and stores equal files once', async () => {
    const [uniqueA, uniqueB, uniqueC] = ['A', 'B', 'C'].map((label) => `only in ${label} ${unique('content')}\n`) as [
      string,
      string,
      string,
    ];
    const repo = await createGitRepository(root, unique('collected'), { ...SKILLS, 'skills/pdf/reference.md': uniqueA });
    const res = await register({ repo_url: repo.fileUrl });
    expect((await settled(res.body.id)).sync.state).toBe('ready');
    const commitOf = async () => (await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key })).body.commit;
    const a = await commitOf();
    await repo.commit({ 'skills/pdf/reference.md': uniqueB });
    await resync(res.body.id);
    const b = await commitOf();
    await repo.commit({ 'skills/pdf/reference.md': uniqueC });
    await resync(res.body.id);
    const c = await commitOf();
    const commits = await db.query('select distinct commit from skill_files where repository_id = $1', [res.body.id]);
    expect(commits.rows.map((r) => r.commit).sort()).toEqual([b, c].sort());
    expect([b, c]).not.toContain(a);
    const blobsHolding = async (text: string) =>
      (await db.query(`select count(*)::int as n from content_blobs where data = convert_to($1, 'UTF8')`, [text])).rows[0].n;
    // A's own file went with it; what every commit and repository of this suite shares is one blob.
    expect(await blobsHolding(uniqueA)).toBe(0);
    expect(await blobsHolding(uniqueB)).toBe(1);
    expect(await blobsHolding(uniqueC)).toBe(1);
    expect(await blobsHolding(SKILLS['skills/csv/SKILL.md'])).toBe(1);

    // Deleting the repository removes its files and the blobs nobody else names.
    expect((await t.request('DELETE', `/repositories/${res.body.id}`, { token: key })).status).toBe(204);
    expect((await db.query('select count(*)::int as n from skill_files where repository_id = $1', [res.body.id])).rows[0].n).toBe(0);
    expect(await blobsHolding(uniqueB)).toBe(0);
    expect(await blobsHolding(uniqueC)).toBe(0);
    expect(await blobsHolding(SKILLS['skills/csv/SKILL.md'])).toBe(1);
  });

  it('skips invalid manifests and reports them in the sync details; the sync is still ready', async () => {
    const repo = await createGitRepository(root, unique('invalid'), {
      'good/SKILL.md': manifest({ name: 'good', description: 'Fine.' }),
      'no-front-matter/SKILL.md': 'just text\n',
      'bad-name/SKILL.md': manifest({ name: 'Bad_Name', description: 'x' }),
      'no-description/SKILL.md': manifest({ name: 'nodesc' }),
      'bad-yaml/SKILL.md': '---\nname: [unclosed\n---\n',
      'zz-dup/SKILL.md': manifest({ name: 'good', description: 'Second of the name.' }),
    });
    const res = await register({ repo_url: repo.fileUrl });
    const ready = await settled(res.body.id);
    expect(ready.sync.state).toBe('ready');
    expect((await skills(res.body.id)).map((s) => s.name)).toEqual(['good']);
    const details = (await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key })).body;
    const warnings = Object.fromEntries(details.warnings.map((w: any) => [w.path, w]));
    expect(Object.keys(warnings).sort()).toEqual(
      ['bad-name/SKILL.md', 'bad-yaml/SKILL.md', 'no-description/SKILL.md', 'no-front-matter/SKILL.md'].concat('zz-dup/SKILL.md').sort(),
    );
    expect(warnings['bad-name/SKILL.md']).toMatchObject({ kind: 'invalid_manifest', message: expect.stringContaining('must match') });
    expect(warnings['no-description/SKILL.md'].message).toContain('no description');
    expect(warnings['zz-dup/SKILL.md']).toMatchObject({ kind: 'duplicate_name', name: 'good' });
  });
});

describe('POST /repositories/{id}/sync', () => {
  it('re-syncs: adds new skills, refreshes changed ones, prunes removed ones; manual skills survive', async () => {
    const repo = await createGitRepository(root, unique('resync'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId });
    const first = await settled(res.body.id);
    const before = byName(await skills(res.body.id));
    const manual = await t.request('POST', `/repositories/${res.body.id}/skills`, {
      token: key,
      body: { name: 'handmade', description: 'Mine.' },
    });
    expect(manual.status).toBe(201);

    await repo.commit({
      'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads and splits PDF files.', version: '2.0' }),
      'skills/csv': null,
      'skills/xlsx/SKILL.md': manifest({ name: 'xlsx', description: 'Reads spreadsheets.' }),
    });
    t.clock.advance(1000);
    const second = await resync(res.body.id);
    expect(second.sync.state).toBe('ready');
    expect(second.sync.last_synced_at > first.sync.last_synced_at).toBe(true);
    expect(second.skill_count).toBe(3);
    const after = byName(await skills(res.body.id));
    expect(Object.keys(after).sort()).toEqual(['handmade', 'pdf', 'xlsx']);
    expect(after.pdf).toMatchObject({ id: before.pdf.id, description: 'Reads and splits PDF files.', version: '2.0' });
    expect(after.pdf.updated_at > before.pdf.updated_at).toBe(true);
    expect(after.handmade).toMatchObject({ id: manual.body.id, source: 'manual', description: 'Mine.' });
    expect(after.xlsx.source).toBe('discovered');
    const rows = await db.query('select name from skills where repository_id = $1 order by name', [res.body.id]);
    expect(rows.rows.map((r) => r.name)).toEqual(['handmade', 'pdf', 'xlsx']);

    // Removing everything prunes the discovered skills only.
    await repo.commit({ skills: null });
    const third = await resync(res.body.id);
    expect(third.skill_count).toBe(1);
    expect((await skills(res.body.id)).map((s) => s.name)).toEqual(['handmade']);
  });

  it('keeps a manual skill when a discovered one has its name, and reports the conflict', async () => {
    const repo = await createGitRepository(root, unique('conflict'), {});
    const res = await register({ repo_url: repo.fileUrl });
    await settled(res.body.id);
    const manual = await t.request('POST', `/repositories/${res.body.id}/skills`, {
      token: key,
      body: { name: 'pdf', description: 'The manual one.', path: 'elsewhere/SKILL.md' },
    });
    await repo.commit({ 'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'The discovered one.' }) });
    const synced = await resync(res.body.id);
    expect(synced.sync.state).toBe('ready');
    expect(await skills(res.body.id)).toEqual([
      expect.objectContaining({ id: manual.body.id, source: 'manual', description: 'The manual one.', path: 'elsewhere/SKILL.md' }),
    ]);
    const details = (await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key })).body;
    expect(details.warnings).toEqual([expect.objectContaining({ kind: 'manual_conflict', name: 'pdf', path: 'skills/pdf/SKILL.md' })]);
  });

  it('answers 409 sync-in-progress while a sync is in flight, on this server and on another one', async () => {
    const repo = await createGitRepository(root, unique('slow'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId });
    await settled(res.body.id);
    // Nodes of one deployment share the master key: whichever wins the race below must decrypt the credential.
    const other = await startTestServer({
      DATABASE_URL: t.databaseUrl,
      ...LOCAL_REMOTES,
      ACIS_MASTER_KEY: t.server.deps.config.masterKey!,
    });
    let release = git.hold();
    try {
      const started = await t.request('POST', `/repositories/${res.body.id}/sync`, { token: key });
      expect(started.status).toBe(202);
      expect(started.body.sync.state).toBe('syncing');
      const again = await t.request('POST', `/repositories/${res.body.id}/sync`, { token: key });
      expect(again.status).toBe(409);
      expect(problemSlug(again)).toBe('sync-in-progress');
      const elsewhere = await other.request('POST', `/repositories/${res.body.id}/sync`, { token: key });
      expect(elsewhere.status).toBe(409);
      expect(problemSlug(elsewhere)).toBe('sync-in-progress');

      // Concurrent requests on both servers: exactly none is accepted while one is in flight; after it, exactly one.
      release();
      await settled(res.body.id);
      release = git.hold();
      const race = await Promise.all([
        t.request('POST', `/repositories/${res.body.id}/sync`, { token: key }),
        other.request('POST', `/repositories/${res.body.id}/sync`, { token: key }),
        t.request('POST', `/repositories/${res.body.id}/sync`, { token: key }),
      ]);
      expect(race.map((r) => r.status).sort()).toEqual([202, 409, 409]);

      // While the sync is in flight (git waits on the held server), the token is in no process's argv.
      await git.held();
      const argv = await commandLines();
      expect(argv.some((args) => args.includes(' fetch '))).toBe(true);
      expect(argv.some((args) => args.includes(TOKEN))).toBe(false);
    } finally {
      release();
      await settled(res.body.id);
      await other.stop();
    }
  });

  it('answers 404 for an unknown repository or one of another integration', async () => {
    const { serviceKey: otherKey } = await t.createIntegration('other');
    const repo = await register({ repo_url: 'http://127.0.0.1:9/x.git' });
    expect((await t.request('POST', '/repositories/rep_unknown/sync', { token: key })).status).toBe(404);
    const foreign = await t.request('POST', `/repositories/${repo.body.id}/sync`, { token: otherKey });
    expect(foreign.status).toBe(404);
    expect(problemSlug(foreign)).toBe('not-found');
    expect((await t.request('GET', `/repositories/${repo.body.id}/sync`, { token: otherKey })).status).toBe(404);
  });
});

describe('syncs a push asked for while one was in flight', () => {
  it('are started by the heartbeat once the sync in flight has ended, wherever it ran', async () => {
    const repo = await createGitRepository(root, unique('requested'), SKILLS);
    const res = await register({ repo_url: repo.fileUrl });
    const first = await settled(res.body.id);
    const head = await repo.commit({ 'skills/late/SKILL.md': manifest({ name: 'late', description: 'Pushed late.' }) });
    // What a webhook leaves behind when the attempt it arrived during ran elsewhere (another node, a sync Job).
    await db.query('update repositories set sync_requested = true where id = $1', [res.body.id]);
    expect(await t.server.deps.repositorySync.startRequested()).toBe(1);
    await settled(res.body.id);
    expect((await t.request('GET', `/repositories/${res.body.id}/sync`, { token: key })).body.commit).toBe(head);
    expect(first.sync.last_synced_at).not.toBeNull();
    expect(await t.server.deps.repositorySync.startRequested()).toBe(0);
  });
});

describe('synced content on another API node', () => {
  it('a node that did not run the sync reads the synced commit from the database, even with the source gone', async () => {
    const repo = await createGitRepository(root, unique('multi'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId });
    await settled(res.body.id);
    // The branch moves on and then the source disappears: the other node must still get the synced commit.
    await repo.commit({ 'skills/pdf/reference.md': 'Changed after the sync.\n' });
    await rm(repo.dir, { recursive: true, force: true });
    const other = await startTestServer({ DATABASE_URL: t.databaseUrl, ACIS_MASTER_KEY: t.server.deps.config.masterKey! });
    const workspace = await mkdtemp(path.join(tmpdir(), 'acis-test-workspace-'));
    try {
      const ids = (await skills(res.body.id)).map((s) => s.id);
      const delivered = await loadRunSkills(other.server.deps, ids);
      expect(delivered.map((skill) => skill.name)).toEqual(['csv', 'pdf']);
      await writeSkills(workspace, wireSkills(delivered));
      expect(await readFile(path.join(workspace, '.claude/skills/pdf/reference.md'), 'utf8')).toBe('How to read PDFs.\n');
      expect(await readdir(path.join(workspace, '.claude/skills/pdf'))).toEqual(['SKILL.md', 'reference.md']);
      expect(await readdir(other.server.deps.config.dataDir)).not.toContain('repositories');
    } finally {
      await rm(workspace, { recursive: true, force: true });
      await other.stop();
    }
  });
});

describe('failed syncs', () => {
  it('a wrong credential ends in error with a reason that does not contain the credential', async () => {
    const repo = await createGitRepository(root, unique('wrong'), SKILLS);
    const wrongSecret = `ghp_${'wr0ngT0ken'.repeat(3)}`;
    const wrong = await t.request('POST', '/credentials', {
      token: key,
      body: { name: unique('wrong'), type: 'git_pat', secret: wrongSecret },
    });
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: wrong.body.id });
    const failed = await settled(res.body.id);
    expect(failed.sync.state).toBe('error');
    expect(failed.sync.error).toMatch(/^authentication failed/);
    expect(failed.sync.error).not.toContain(wrongSecret);
    expect(failed.skill_count).toBe(0);
    expect(t.logs.join('')).not.toContain(wrongSecret);
    expect(t.logs.join('')).not.toContain(TOKEN);
  });

  it('no credential for a private repository: authentication required', async () => {
    const repo = await createGitRepository(root, unique('private'), SKILLS);
    const failed = await settled((await register({ repo_url: git.url(path.basename(repo.dir)) })).body.id);
    expect(failed.sync).toMatchObject({ state: 'error', error: expect.stringMatching(/^authentication required/) });
  });

  it('checks the remote again before every fetch: a host the deployment no longer allows fails the sync and fetches nothing', async () => {
    const repo = await createGitRepository(root, unique('disallowed'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId });
    expect((await settled(res.body.id)).sync.state).toBe('ready');
    const fetchesBefore = git.requests.length;
    const strict = await startTestServer({
      DATABASE_URL: t.databaseUrl,
      ACIS_MASTER_KEY: t.server.deps.config.masterKey!,
      ACIS_ALLOW_PLAIN_REPOS: '1',
    });
    try {
      expect((await strict.request('POST', `/repositories/${res.body.id}/sync`, { token: key })).status).toBe(202);
      const ended = await syncEnded(strict, key, res.body.id);
      expect(ended.sync).toMatchObject({
        state: 'error',
        error: expect.stringMatching(/^the repository's host is refused: 127\.0\.0\.1 is a loopback address/),
      });
      expect(ended.skill_count).toBe(2);
      expect(git.requests.length).toBe(fetchesBefore);
    } finally {
      await strict.stop();
    }
  });

  it('a missing branch, an unreachable host, a missing repository each give their reason', async () => {
    const repo = await createGitRepository(root, unique('branches'), SKILLS);
    const branch = await settled((await register({ repo_url: repo.fileUrl, branch: 'nope' })).body.id);
    expect(branch.sync).toMatchObject({ state: 'error', error: expect.stringMatching(/^branch not found/), last_synced_at: null });
    const host = await settled((await register({ repo_url: 'http://127.0.0.1:9/acme/skills.git' })).body.id);
    expect(host.sync.error).toMatch(/^host unreachable/);
    const dns = await settled((await register({ repo_url: 'https://git.invalid/acme/skills.git' })).body.id);
    expect(dns.sync.error).toMatch(/^host unreachable/);
    const missing = await settled((await register({ repo_url: `file://${root}/does-not-exist` })).body.id);
    expect(missing.sync.error).toMatch(/^repository not found/);
  });

  it('over ssh, a git_ssh_key goes to ssh as a key file; other credential types are refused for ssh remotes', async () => {
    const privateKey = `-----BEGIN OPENSSH PRIVATE KEY-----\n${'c3NoLWtleS1zZWNyZXQ'.repeat(4)}\n-----END OPENSSH PRIVATE KEY-----\n`;
    const sshKey = await t.request('POST', '/credentials', {
      token: key,
      body: { name: unique('ssh'), type: 'git_ssh_key', secret: privateKey },
    });
    expect(sshKey.status).toBe(201);
    const unreachable = await settled(
      (await register({ repo_url: 'ssh://git@127.0.0.1:1/acme/skills.git', credential_id: sshKey.body.id })).body.id,
    );
    expect(unreachable.sync.error).toMatch(/^host unreachable/);
    expect(unreachable.sync.error).not.toContain('c3NoLWtleS1zZWNyZXQ');
    expect(t.logs.join('')).not.toContain('c3NoLWtleS1zZWNyZXQ');
    const mismatch = await settled((await register({ repo_url: 'git@127.0.0.1:acme/skills.git', credential_id: credentialId })).body.id);
    expect(mismatch.sync.error).toBe('a git_pat credential cannot authenticate an ssh remote; use a git_ssh_key credential');
    const keyOverHttp = await settled((await register({ repo_url: 'http://127.0.0.1:9/x.git', credential_id: sshKey.body.id })).body.id);
    expect(keyOverHttp.sync.error).toMatch(/^a git_ssh_key credential needs an ssh remote/);
  });

  it('a failed re-sync keeps the catalog and last_synced_at of the last good one', async () => {
    const repo = await createGitRepository(root, unique('keep'), SKILLS);
    const res = await register({ repo_url: repo.fileUrl });
    const good = await settled(res.body.id);
    const patched = await t.request('PATCH', `/repositories/${res.body.id}`, { token: key, body: { branch: 'gone' } });
    expect(patched.body.sync).toEqual({ state: 'pending', last_synced_at: good.sync.last_synced_at, error: null });
    const failed = await resync(res.body.id);
    expect(failed.sync).toEqual({
      state: 'error',
      last_synced_at: good.sync.last_synced_at,
      error: expect.stringMatching(/^branch not found/),
    });
    expect((await skills(res.body.id)).map((s) => s.name).sort()).toEqual(['csv', 'pdf']);
  });
});

describe('PATCH /repositories/{id} and sync', () => {
  it('a branch change sets pending; the next sync reads the new branch', async () => {
    const repo = await createGitRepository(root, unique('branch'), SKILLS);
    await repo.commit({ 'skills/dev-only/SKILL.md': manifest({ name: 'dev-only', description: 'Only on develop.' }) }, 'develop');
    const res = await register({ repo_url: repo.fileUrl });
    expect((await settled(res.body.id)).skill_count).toBe(2);
    const patched = await t.request('PATCH', `/repositories/${res.body.id}`, { token: key, body: { branch: 'develop' } });
    expect(patched.body.sync.state).toBe('pending');
    // Pending stays pending: a re-scan needs the sync operation.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await t.request('GET', `/repositories/${res.body.id}`, { token: key })).body.sync.state).toBe('pending');
    const synced = await resync(res.body.id);
    expect(synced.skill_count).toBe(3);
    expect((await skills(res.body.id)).map((s) => s.name).sort()).toEqual(['csv', 'dev-only', 'pdf']);
  });

  it('a change while a sync is in flight makes that sync stale: its result is dropped', async () => {
    const repo = await createGitRepository(root, unique('stale'), SKILLS);
    const res = await register({ repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId });
    await settled(res.body.id);
    await repo.commit({ 'skills/new/SKILL.md': manifest({ name: 'new', description: 'Added.' }) });
    const release = git.hold();
    try {
      expect((await t.request('POST', `/repositories/${res.body.id}/sync`, { token: key })).status).toBe(202);
      const patched = await t.request('PATCH', `/repositories/${res.body.id}`, { token: key, body: { credential_id: null } });
      expect(patched.body.sync.state).toBe('pending');
      release();
      // The attempt goes on in the background; wait until it has finished and dropped its result.
      const dropped = () => t.logs.some((line) => line.includes(res.body.id) && line.includes('its result was dropped'));
      for (let i = 0; i < 200 && !dropped(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(dropped()).toBe(true);
    } finally {
      release();
    }
    const after = await t.request('GET', `/repositories/${res.body.id}`, { token: key });
    expect(after.body.sync.state).toBe('pending');
    expect(after.body.skill_count).toBe(2);
  });
});

describe('over SSH (a real sshd on loopback)', () => {
  it("pins the server's host key at the first sync and fails a later sync, saying so, when the server presents another", async () => {
    const sshd = await startSshServer();
    try {
      const repo = await createGitRepository(root, unique('pinned'), SKILLS);
      const credential = await t.request('POST', '/credentials', {
        token: key,
        body: { name: unique('deploy-key'), type: 'git_ssh_key', secret: sshd.clientKey },
      });
      const first = await settled((await register({ repo_url: sshd.url(repo.dir), credential_id: credential.body.id })).body.id);
      expect(first.sync, JSON.stringify(first.sync)).toMatchObject({ state: 'ready' });
      const pinned = (await db.query('select ssh_known_hosts from repositories where id = $1', [first.id])).rows[0]
        .ssh_known_hosts as string;
      expect(pinned).toMatch(new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 AAAA`));
      expect(JSON.stringify((await t.request('GET', `/repositories/${first.id}`, { token: key })).body)).not.toContain('ssh-ed25519');

      // The pinned key is required, and it is the server's: the next sync succeeds.
      expect((await t.request('POST', `/repositories/${first.id}/sync`, { token: key })).status).toBe(202);
      expect((await settled(first.id)).sync.state).toBe('ready');

      // Another key pinned for the same host and port stands for a server whose key changed.
      const otherFile = path.join(root, unique('other-host-key'));
      await promisify(execFile)('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', otherFile]);
      const otherKey = (await readFile(`${otherFile}.pub`, 'utf8')).split(' ').slice(0, 2).join(' ');
      const forged = `[127.0.0.1]:${sshd.port} ${otherKey}`;
      await db.query('update repositories set ssh_known_hosts = $1 where id = $2', [forged, first.id]);
      expect((await t.request('POST', `/repositories/${first.id}/sync`, { token: key })).status).toBe(202);
      const changed = await settled(first.id);
      expect(changed.sync).toMatchObject({ state: 'error', error: expect.stringMatching(/^host key changed: /) });
      expect(changed.skill_count).toBe(2);
      expect((await db.query('select ssh_known_hosts from repositories where id = $1', [first.id])).rows[0].ssh_known_hosts).toBe(forged);
    } finally {
      await sshd.stop();
    }
  });

  it('syncs with a git_ssh_key, refuses a key the server does not know, and leaves the key nowhere', async () => {
    const sshd = await startSshServer();
    try {
      const repo = await createGitRepository(root, unique('ssh'), SKILLS);
      const credential = await t.request('POST', '/credentials', {
        token: key,
        body: { name: unique('deploy-key'), type: 'git_ssh_key', secret: sshd.clientKey },
      });
      expect(credential.status).toBe(201);
      const synced = await settled((await register({ repo_url: sshd.url(repo.dir), credential_id: credential.body.id })).body.id);
      expect(synced.sync, JSON.stringify(synced.sync)).toMatchObject({ state: 'ready', error: null });
      expect((await skills(synced.id)).map((s) => s.name).sort()).toEqual(['csv', 'pdf']);

      // Another key: the server refuses it, and the reason says so.
      const strangerFile = path.join(root, unique('stranger-key'));
      await promisify(execFile)('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', strangerFile]);
      const strangerKey = await readFile(strangerFile, 'utf8');
      await rm(strangerFile);
      await rm(`${strangerFile}.pub`);
      const stranger = await t.request('POST', '/credentials', {
        token: key,
        body: { name: unique('stranger'), type: 'git_ssh_key', secret: strangerKey },
      });
      const refused = await settled((await register({ repo_url: sshd.url(repo.dir), credential_id: stranger.body.id })).body.id);
      expect(refused.sync.state).toBe('error');
      expect(refused.sync.error).toMatch(/^authentication failed/);

      // Neither key is left on disk (the key files are gone with their git sessions), in a log or a reason.
      // The third line: the first is the format's header, the same in every unencrypted ed25519 key.
      const keyBody = (pem: string) => pem.split('\n')[2]!;
      for (const pem of [sshd.clientKey, strangerKey]) {
        expect(JSON.stringify([synced, refused])).not.toContain(keyBody(pem));
        expect(t.logs.join('')).not.toContain(keyBody(pem));
      }
      const leftovers = (await readdir(tmpdir())).filter((name) => name.startsWith('acis-git-'));
      for (const name of leftovers) {
        const files = await readdir(path.join(tmpdir(), name)).catch(() => []);
        for (const file of files) {
          const content = await readFile(path.join(tmpdir(), name, file), 'utf8').catch(() => '');
          for (const pem of [sshd.clientKey, strangerKey]) expect(content).not.toContain(keyBody(pem));
        }
      }
    } finally {
      await sshd.stop();
    }
  });
});

describe('file:// repositories', () => {
  it('a file:// repository registered while allowed fails its sync on a deployment that does not allow it', async () => {
    const repo = await createGitRepository(root, unique('gated'), SKILLS);
    const res = await register({ repo_url: repo.fileUrl });
    await settled(res.body.id);
    const strict = await startTestServer({ DATABASE_URL: t.databaseUrl });
    try {
      const started = await strict.request('POST', `/repositories/${res.body.id}/sync`, { token: key });
      expect(started.status).toBe(202);
      let state = started.body;
      for (let i = 0; i < 100 && state.sync.state === 'syncing'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        state = (await strict.request('GET', `/repositories/${res.body.id}`, { token: key })).body;
      }
      expect(state.sync).toMatchObject({ state: 'error', error: 'file:// repositories are not enabled on this deployment' });
    } finally {
      await strict.stop();
    }
  });
});

describe('recovery', () => {
  it('a sync left syncing by a process that is gone is run again by the next server to start', async () => {
    const repo = await createGitRepository(root, unique('orphan'), SKILLS);
    const res = await register({ repo_url: repo.fileUrl });
    await settled(res.body.id);
    await repo.commit({ 'skills/late/SKILL.md': manifest({ name: 'late', description: 'Added later.' }) });
    await db.query(`update repositories set sync_state = 'syncing', sync_node_id = 'node_gone', sync_claim = 'dead' where id = $1`, [
      res.body.id,
    ]);
    expect((await t.request('POST', `/repositories/${res.body.id}/sync`, { token: key })).status).toBe(409);
    const next = await startTestServer({ DATABASE_URL: t.databaseUrl, ...LOCAL_REMOTES });
    try {
      const recovered = await settled(res.body.id);
      expect(recovered.sync.state).toBe('ready');
      expect(recovered.skill_count).toBe(3);
    } finally {
      await next.stop();
    }
  });
});

describe('roles and synced skills', () => {
  it('a selected role accepts synced skills of the tenant repository and refuses others', async () => {
    const repo = await createGitRepository(root, unique('roles'), SKILLS);
    const res = await register({ repo_url: repo.fileUrl });
    await settled(res.body.id);
    const found = byName(await skills(res.body.id));
    const tenant = await t.request('PUT', `/tenants/by-external-id/${unique('t:tenant')}`, { token: key, body: {} });
    expect(
      (await t.request('PUT', `/tenants/${tenant.body.id}/repository`, { token: key, body: { repository_id: res.body.id } })).status,
    ).toBe(200);
    const role = await t.request('POST', `/tenants/${tenant.body.id}/roles`, {
      token: key,
      body: { name: 'pdf-only', skill_access: { mode: 'selected', skill_ids: [found.pdf.id] } },
    });
    expect(role.status).toBe(201);
    expect(role.body.skill_access).toEqual({ mode: 'selected', skill_ids: [found.pdf.id] });
    const bad = await t.request('POST', `/tenants/${tenant.body.id}/roles`, {
      token: key,
      body: { name: 'bad', skill_access: { mode: 'selected', skill_ids: [found.csv.id, 'skl_notsynced'] } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual([expect.objectContaining({ pointer: '/skill_access/skill_ids/1' })]);
  });
});
