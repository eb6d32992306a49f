/**
 * The sync report listener (ACIS_SYNC_REPORT_LISTEN), where a sync Job that holds no database
 * credential hands its attempt's result to the API server: as a hostile Job or repository would call
 * it. The attempts are real claims (syncs held at a real git server); the listener is the real one.
 * A wrong, other-repository or expired token is refused with problem+json, an oversized or malformed
 * body too, and none of them changes the repository, its skills or its stored content; a valid
 * report is stored as the in-process sync stores it; the public API port does not serve the path.
 * The listener speaks HTTPS only, with a certificate of the deployment CA naming the names it is given:
 * a plaintext client, one trusting another CA or dialling a name it does not carry gets nothing, and
 * the token never crosses the network in clear.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_REPORT_BYTES, reportPath, SYNC_REPORT_KEY_PURPOSE, syncReportToken } from '../../api-server/repositories/sync-report.js';
import { postReport, ReportListenerUntrusted } from '../../api-server/repositories/sync-report-client.js';
import { runSyncJob } from '../../api-server/repositories/sync-job.js';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { cuttableNetwork } from '../helpers/cuttable-network.js';
import { createGitRepository, type GitHttpServer, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { syncEnded, unique } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

const GIT_PASSWORD = `ghp_${randomBytes(12).toString('hex')}`;
const COMMIT = 'c0ffee'.repeat(6).padEnd(40, '0');
const SKILL_MD = manifest({ name: 'pdf', description: 'Reads PDFs.' });

let root: string;
let git: GitHttpServer;
let t: TestServer;
let db: pg.Client;
let key: string;
let tokenKey: Buffer;
let release: () => void;
let credentialId: string;
/** The deployment CA's certificate, which a sync Job trusts (and only it). */
let caPem: string;
let agent: https.Agent;
/** Two repositories whose syncs are in flight (their git fetch held), and their claims. */
let a: { id: string; claim: string };
let b: { id: string; claim: string };

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'acis-sync-report-'));
  git = await serveGitOverHttp(root, { password: GIT_PASSWORD });
  // The listener's certificate names what a Job dials (the sync report Service's names, in a cluster).
  t = await startTestServer({
    ACIS_SYNC_REPORT_LISTEN: '127.0.0.1:0',
    ACIS_SYNC_REPORT_TLS_NAMES: 'localhost',
    ACIS_ALLOW_PLAIN_REPOS: '1',
    ACIS_REPOSITORY_ALLOW: '127.0.0.1',
  });
  caPem = await readFile(path.join(t.server.deps.config.deploymentCaDir, 'ca.crt'), 'utf8');
  agent = new https.Agent({ ca: caPem, keepAlive: false });
  ({ serviceKey: key } = await t.createIntegration('sync report'));
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
  tokenKey = t.server.deps.vault.deriveKey(SYNC_REPORT_KEY_PURPOSE);
  const credential = await t.request('POST', '/credentials', { token: key, body: { name: 'git', type: 'git_pat', secret: GIT_PASSWORD } });
  credentialId = credential.body.id;
  release = git.hold();
  a = await inFlight();
  b = await inFlight();
}, 60_000);
afterAll(async () => {
  release?.();
  agent?.destroy();
  await db?.end();
  await t?.stop();
  await git?.stop();
  await rm(root, { recursive: true, force: true });
});

/** A registered repository whose sync is claimed and waiting at the git server. */
async function inFlight(): Promise<{ id: string; claim: string }> {
  const repo = await createGitRepository(root, unique('skills'), { 'pdf/SKILL.md': SKILL_MD });
  const res = await t.request('POST', '/repositories', {
    token: key,
    body: { name: unique('repo'), repo_url: git.url(path.basename(repo.dir)), credential_id: credentialId },
  });
  expect(res.status, res.text).toBe(201);
  await git.held(path.basename(repo.dir));
  return { id: res.body.id, claim: (await stateOf(res.body.id)).sync_claim! };
}

/** What the database holds of a repository's sync, its skills and its stored content. */
async function stateOf(id: string) {
  const row = (
    await db.query<{ sync_state: string; sync_claim: string | null; sync_commit: string | null; sync_error: string | null }>(
      'select sync_state, sync_claim, sync_commit, sync_error from repositories where id = $1',
      [id],
    )
  ).rows[0]!;
  const skills = (await db.query<{ n: number }>('select count(*)::int as n from skills where repository_id = $1', [id])).rows[0]!.n;
  const files = (await db.query<{ n: number }>('select count(*)::int as n from skill_files where repository_id = $1', [id])).rows[0]!.n;
  return { ...row, skills, files };
}

const listenerUrl = () => `https://localhost:${t.server.syncReport!.port}`;
const tokenOf = (id: string, claim: string) => syncReportToken(tokenKey, id, claim);

function validReport(overrides: Record<string, unknown> = {}) {
  return {
    state: 'fetched',
    commit: COMMIT,
    skills: [{ name: 'pdf', description: 'Reads PDFs.', version: null, path: 'pdf/SKILL.md' }],
    manifests: ['pdf/SKILL.md'],
    warnings: [],
    files: [{ skill_dir: 'pdf', path: 'SKILL.md', data: Buffer.from(SKILL_MD).toString('base64'), executable: false }],
    ...overrides,
  };
}

async function post(
  target: { id: string; claim: string },
  options: { token?: string | null; body?: unknown; raw?: string; contentType?: string; base?: string } = {},
) {
  const token = options.token === undefined ? tokenOf(target.id, target.claim) : options.token;
  const response = await send(`${options.base ?? listenerUrl()}${reportPath(target.id, target.claim)}`, {
    method: 'POST',
    headers: {
      'content-type': options.contentType ?? 'application/json',
      ...(token !== null && { authorization: `Bearer ${token}` }),
    },
    body: options.raw ?? JSON.stringify(options.body ?? validReport()),
  });
  return { ...response, body: response.text ? JSON.parse(response.text) : undefined };
}

/** One request over HTTPS trusting the deployment CA (or plain HTTP to an http URL), answered in full. */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<{ status: number; headers: { get(name: string): string | undefined }; text: string }>((resolve, reject) => {
    const secure = url.startsWith('https:');
    const req = (secure ? https : http).request(
      url,
      { method: options.method ?? 'GET', headers: options.headers, ...(secure && { agent }) },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: { get: (name) => res.headers[name.toLowerCase()] as string | undefined }, text }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * A POST whose body is `mib` MiB of spaces after a JSON prefix, written until the answer arrives
 * (or all of it is written); with `length`, that Content-Length is declared instead of chunking.
 */
function rawPost(target: { id: string; claim: string }, length: string | undefined, mib: number) {
  return new Promise<{ status: number; type: string; body: any; sentMiB: number }>((resolve, reject) => {
    const req = https.request(`${listenerUrl()}${reportPath(target.id, target.claim)}`, {
      method: 'POST',
      agent,
      headers: {
        authorization: `Bearer ${tokenOf(target.id, target.claim)}`,
        'content-type': 'application/json',
        ...(length !== undefined && { 'content-length': length }),
      },
    });
    let sentMiB = 0;
    let answered = false;
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const write = () => {
      while (!answered && sentMiB < mib) {
        sentMiB += 1;
        if (!req.write(chunk)) return void req.once('drain', write);
      }
      if (!answered && length === undefined) req.end();
    };
    req.on('response', (res) => {
      answered = true;
      let text = '';
      res.on('data', (data) => (text += data));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body: JSON.parse(text), sentMiB });
      });
    });
    // The listener may close the connection under a client still writing: that is the refusal too.
    req.on('error', (error) => (answered ? undefined : reject(error)));
    req.write('{"state":"fetched","commit":"');
    write();
  });
}

/** The refusal is a problem document of the given status and slug, and the attempt is as it was. */
async function refusedUnchanged(response: Awaited<ReturnType<typeof post>>, status: number, slug: string) {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  expect(response.body.type).toMatch(new RegExp(`/problems/${slug}$`));
  expect(response.body.status).toBe(status);
  for (const target of [a, b]) {
    expect(await stateOf(target.id)).toEqual({
      sync_state: 'syncing',
      sync_claim: target.claim,
      sync_commit: null,
      sync_error: null,
      skills: 0,
      files: 0,
    });
  }
}

describe('the sync report listener over TLS', () => {
  /** A stale attempt of `a`: its token is a real one, answered 403 without storing anything. */
  const stale = () => ({ id: a.id, claim: randomBytes(12).toString('hex') });
  const urlOf = (target: { id: string; claim: string }, base = listenerUrl()) => new URL(reportPath(target.id, target.claim), base);

  it('answers nothing to plaintext HTTP: the connection is dropped, the token sent in clear never read', async () => {
    const before = t.logs.length;
    const plain = await new Promise<string>((resolve) => {
      const req = http.request(`http://127.0.0.1:${t.server.syncReport!.port}${reportPath(a.id, a.claim)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokenOf(a.id, a.claim)}`, 'content-type': 'application/json' },
      });
      req.on('response', (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (error: NodeJS.ErrnoException) => resolve(String(error.code)));
      req.end(JSON.stringify(validReport()));
    });
    expect(plain).toMatch(/^(ECONNRESET|EPIPE)$/);
    expect(t.logs.slice(before).filter((line) => line.includes('sync result'))).toEqual([]);
    await refusedUnchanged(await post(a, { token: null }), 401, 'insufficient-scope');
  });

  it("a Job's client refuses a listener it cannot verify: another CA, or a name the certificate does not carry; and an http URL", async () => {
    const other = await createEphemeralCa('another CA');
    const body = JSON.stringify(validReport());
    await expect(postReport(urlOf(a), tokenOf(a.id, a.claim), body, other.certPem)).rejects.toThrow(ReportListenerUntrusted);
    // The listener's address, but not a name its certificate carries.
    const byAddress = urlOf(a, `https://127.0.0.1:${t.server.syncReport!.port}`);
    await expect(postReport(byAddress, tokenOf(a.id, a.claim), body, caPem)).rejects.toThrow(/ERR_TLS_CERT_ALTNAME_INVALID/);
    await expect(postReport(urlOf(a, `http://localhost:${t.server.syncReport!.port}`), 'x', body, caPem)).rejects.toThrow(/must be https/);
    await refusedUnchanged(await post(a, { token: null }), 401, 'insufficient-scope');
  });

  it('puts no token and no result in clear on the network between a Job and the listener', async () => {
    const network = await cuttableNetwork(t.server.syncReport!.port);
    const target = stale();
    const token = tokenOf(target.id, target.claim);
    const body = JSON.stringify(validReport({ commit: 'feed'.repeat(10) }));
    const answer = await postReport(urlOf(target, `https://localhost:${network.port}`), token, body, caPem);
    expect(answer.status).toBe(403);
    const wire = network.carried();
    expect(wire.length).toBeGreaterThan(0);
    for (const needle of [token, 'feed'.repeat(10), 'Bearer', target.claim]) expect(wire.includes(needle), needle).toBe(false);
    await network.close();
  });

  it('acis sync-repository refuses an http report URL, and a missing or unreadable CA file, before it fetches anything', async () => {
    const tokenFile = path.join(root, 'job-token');
    await writeFile(tokenFile, 'token\n');
    const env = {
      ACIS_SYNC_CLAIM: 'c1a10000',
      ACIS_SYNC_REPORT_URL: 'https://localhost:1',
      ACIS_SYNC_TOKEN_FILE: tokenFile,
      ACIS_SYNC_REPOSITORY_URL: 'https://example.com/a.git',
      ACIS_SYNC_BRANCH: 'main',
      ACIS_DATA_DIR: path.join(root, 'job'),
      LOG_LEVEL: 'silent',
    };
    await expect(
      runSyncJob('rep_01ABC', { ...env, ACIS_SYNC_REPORT_URL: 'http://localhost:1', ACIS_SYNC_REPORT_CA_FILE: tokenFile }),
    ).rejects.toThrow(/ACIS_SYNC_REPORT_URL: must be an https URL/);
    await expect(runSyncJob('rep_01ABC', env)).rejects.toThrow(/ACIS_SYNC_REPORT_CA_FILE: .*deployment CA/);
    await expect(runSyncJob('rep_01ABC', { ...env, ACIS_SYNC_REPORT_CA_FILE: path.join(root, 'absent.crt') })).rejects.toThrow(
      /ACIS_SYNC_REPORT_CA_FILE: cannot be read \(ENOENT\)/,
    );
  });
});

describe('POST /internal/repository-syncs/{id}/claims/{claim}/result (the sync report listener)', () => {
  it('without the token, or with a wrong one, answers 401 and changes nothing', async () => {
    const none = await post(a, { token: null });
    await refusedUnchanged(none, 401, 'insufficient-scope');
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    await refusedUnchanged(await post(a, { token: randomBytes(32).toString('base64url') }), 401, 'insufficient-scope');
    // A token is not a password: the one derived under another key (another deployment) is worth nothing.
    await refusedUnchanged(await post(a, { token: syncReportToken(randomBytes(32), a.id, a.claim) }), 401, 'insufficient-scope');
  });

  it("another repository's token, or one moved to another claim, answers 401 and changes nothing", async () => {
    await refusedUnchanged(await post(a, { token: tokenOf(b.id, b.claim) }), 401, 'insufficient-scope');
    await refusedUnchanged(await post({ id: a.id, claim: b.claim }, { token: tokenOf(b.id, b.claim) }), 401, 'insufficient-scope');
    await refusedUnchanged(await post({ id: b.id, claim: a.claim }, { token: tokenOf(a.id, a.claim) }), 401, 'insufficient-scope');
  });

  it('a token whose claim is not current (an earlier attempt) answers 403 sync-superseded and changes nothing', async () => {
    const stale = { id: a.id, claim: randomBytes(12).toString('hex') };
    const response = await post(stale);
    await refusedUnchanged(response, 403, 'sync-superseded');
    expect(response.body.detail).toMatch(/no longer current/);
  });

  it('an oversized body is refused with 413, declared or streamed, and changes nothing', async () => {
    // Declared: refused before a byte of the body is read.
    const declared = await rawPost(a, String(512 * 1024 * 1024), 0);
    expect(declared.status).toBe(413);
    expect(declared.type).toBe('application/problem+json');
    expect(declared.body.type).toMatch(/\/problems\/payload-too-large$/);
    // Streamed without a length, a little past the bound: nothing past it kept, the answer readable.
    const limitMiB = Math.ceil(MAX_REPORT_BYTES / 1024 / 1024);
    const streamed = await rawPost(a, undefined, limitMiB + 4);
    expect(streamed.status).toBe(413);
    expect(streamed.type).toBe('application/problem+json');
    expect(streamed.body.type).toMatch(/\/problems\/payload-too-large$/);
    // Far past it: the connection is cut once the bound and the drain allowance are behind.
    const endless = await rawPost(a, undefined, limitMiB + 256).catch((error: NodeJS.ErrnoException) => String(error.code));
    if (typeof endless === 'string') expect(endless).toMatch(/^(EPIPE|ECONNRESET)$/);
    else expect(endless.sentMiB).toBeLessThan(limitMiB + 256);
    await refusedUnchanged(await post(a, { token: null }), 401, 'insufficient-scope');
  }, 60_000);

  it('a malformed body is refused (400 not JSON, 415 not declared JSON, 422 outside the schema) and changes nothing', async () => {
    await refusedUnchanged(await post(a, { raw: '{"state":' }), 400, 'validation-error');
    await refusedUnchanged(await post(a, { contentType: 'text/plain' }), 415, 'unsupported-media-type');
    const invalid: [string, Record<string, unknown>][] = [
      ['a commit that is not a full id', { commit: 'HEAD' }],
      ['a path that climbs out', { files: [{ skill_dir: 'pdf', path: '../../etc/passwd', data: '', executable: false }] }],
      ['an absolute skill directory', { files: [{ skill_dir: '/etc', path: 'passwd', data: '', executable: false }] }],
      ['a file outside every manifest directory', { files: [{ skill_dir: 'other', path: 'x.md', data: '', executable: false }] }],
      ['a file inside .git', { files: [{ skill_dir: 'pdf', path: '.git/config', data: '', executable: false }] }],
      ['data that is not base64', { files: [{ skill_dir: 'pdf', path: 'SKILL.md', data: '<script>', executable: false }] }],
      ['a skill whose manifest is not listed', { skills: [{ name: 'pdf', description: 'x', version: null, path: 'csv/SKILL.md' }] }],
      ['a skill name that is not a slug', { skills: [{ name: 'Robert"); DROP', description: 'x', version: null, path: 'pdf/SKILL.md' }] }],
      ['a description over its limit', { skills: [{ name: 'pdf', description: 'x'.repeat(5000), version: null, path: 'pdf/SKILL.md' }] }],
      [
        'a manual conflict (the API server finds those)',
        { warnings: [{ kind: 'manual_conflict', path: null, name: 'pdf', message: 'x' }] },
      ],
      [
        'more files than a sync may store',
        { files: Array.from({ length: 20_001 }, (_, i) => ({ skill_dir: 'pdf', path: `f${i}`, data: '', executable: false })) },
      ],
      ['a field of its own', { owner: 'root' }],
    ];
    for (const [what, overrides] of invalid) {
      const response = await post(a, { body: validReport(overrides) });
      expect(response.status, what).toBe(422);
      expect(response.body.errors?.length, what).toBeGreaterThan(0);
      await refusedUnchanged(response, 422, 'validation-error');
    }
    await refusedUnchanged(await post(a, { body: { state: 'error', error: 'x'.repeat(4096) } }), 422, 'validation-error');
  });

  it('serves nothing else: another path 404, another method 405; the public API port does not serve it', async () => {
    const other = await send(`${listenerUrl()}/repositories`, { headers: { authorization: `Bearer ${tokenOf(a.id, a.claim)}` } });
    expect(other.status).toBe(404);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    const get = await send(`${listenerUrl()}${reportPath(a.id, a.claim)}`, {
      headers: { authorization: `Bearer ${tokenOf(a.id, a.claim)}` },
    });
    expect(get.status).toBe(405);
    const publicPort = await post(a, { base: t.url });
    expect(publicPort.status).toBe(404);
    await refusedUnchanged(await post(a, { token: null }), 401, 'insufficient-scope');
  });

  it("a valid report is stored as a sync in process stores it; the attempt's token then expires with its claim", async () => {
    // The host keys the Job's git saw are pinned for a repository that has none yet.
    const knownHosts = '[git.example.com]:22 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';
    const stored = await post(a, { body: validReport({ known_hosts: knownHosts }) });
    expect(stored.status, stored.text).toBe(200);
    expect((await db.query('select ssh_known_hosts from repositories where id = $1', [a.id])).rows[0].ssh_known_hosts).toBe(knownHosts);
    expect(stored.body).toEqual({ state: 'ready', commit: COMMIT });
    expect(await stateOf(a.id)).toMatchObject({ sync_state: 'ready', sync_claim: null, sync_commit: COMMIT, skills: 1, files: 1 });
    const skills = await t.request('GET', `/repositories/${a.id}/skills`, { token: key });
    expect(skills.body.data.map((s: any) => [s.name, s.path, s.source])).toEqual([['pdf', 'pdf/SKILL.md', 'discovered']]);
    // Replayed, it is an expired attempt's: nothing more is written.
    await expect(post(a)).resolves.toMatchObject({ status: 403 });
    const failed = await post(b, { body: { state: 'error', error: 'authentication failed: the host refused the credential' } });
    expect(failed.body).toEqual({ state: 'error', error: 'authentication failed: the host refused the credential' });
    expect(await stateOf(b.id)).toMatchObject({
      sync_state: 'error',
      sync_error: 'authentication failed: the host refused the credential',
    });
    // The attempts still fetching in process find their claims ended: their results are dropped.
    release();
    await new Promise<void>((resolve) => {
      const check = () => (t.logs.filter((l) => l.includes('its result was dropped')).length >= 2 ? resolve() : setTimeout(check, 25));
      check();
    });
    expect((await syncEnded(t, key, a.id)).sync).toMatchObject({ state: 'ready', error: null });
    expect(await stateOf(a.id)).toMatchObject({ sync_commit: COMMIT });
  }, 30_000);
});
