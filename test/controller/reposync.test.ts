/**
 * Repository syncs on the cluster: with ACIS_REPOSITORY_SYNC_RUNNER=kubernetes the API server claims
 * a sync and writes a RepositorySync (and the credential's Secret) instead of running git itself; the
 * controller runs it as a Job whose pod runs the real `acis sync-repository` (in bubblewrap, on the
 * simulated kubelet) against a git server that requires the credential, and hands what it found to the
 * API server's sync report listener, which stores it in the real PostgreSQL: the Job holds no
 * database credential (a canary database URL is in no object of the cluster). The
 * REST `sync` object and the RepositorySync's status tell the same outcome; the credential exists in
 * the cluster only while the Job runs and appears in no status, log or kubectl output. Attempts do
 * not depend on the API node that handed them: a node that stops leaves its Job running, a Job that
 * dies without writing its outcome ends the sync with the cluster's reason, one past the Job
 * deadline is handed over again; a GitHub App's key never reaches the cluster, only a token.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningController } from '../../controller/controller.js';
import { ROOT } from '../helpers/acis-process.js';
import { createGitRepository, type GitHttpServer, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { type GitHubStub, startGitHubStub } from '../helpers/github-stub.js';
import { kubectl } from '../helpers/kube-tools.js';
import { syncEnded, unique } from '../helpers/provision.js';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { type Cluster, eventually, NAMESPACE, startCluster, startTestController } from './harness.js';

const SYNC_IMAGE = 'acis:test';
const CA_CONFIGMAP = 'acis-egress-ca';
const TOKEN = `ghp_${'reposyncCanary'.repeat(2)}`;
const APP_ID = '31337';
const INSTALLATION_ID = '4242';
const APP_TOKEN = `ghs_${randomBytes(18).toString('hex')}`;
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PRIVATE_KEY_PEM = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const KEY_CANARY = PRIVATE_KEY_PEM.split('\n')[5]!;
/** What the API server needs to reach the cluster, for every node started here. */
let clusterEnv: Record<string, string>;

let cluster: Cluster;
let controller: RunningController;
let t: TestServer;
let git: GitHttpServer;
let appGit: GitHttpServer;
let github: GitHubStub;
let root: string;
let key: string;
let credentialId: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'acis-reposync-'));
  git = await serveGitOverHttp(root, { password: TOKEN });
  appGit = await serveGitOverHttp(root, { username: 'x-access-token', password: APP_TOKEN });
  github = await startGitHubStub({ appId: APP_ID, publicKey, installations: { [INSTALLATION_ID]: APP_TOKEN } });
  const nodeModules = realpathSync(path.join(ROOT, 'node_modules'));
  cluster = await startCluster({
    // The API server's image: the `acis` CLI from this checkout (its node_modules wherever they are).
    // The test's git repositories too, which a Job reads as file:// repositories.
    images: { [SYNC_IMAGE]: { command: process.execPath, binds: [ROOT, nodeModules, root] } },
    // The sync pods reach the API server's report listener, git and GitHub at 127.0.0.1, as host
    // processes: the pods share the host's network.
    network: 'loopback',
  });
  clusterEnv = {
    ACIS_REPOSITORY_SYNC_RUNNER: 'kubernetes',
    ACIS_K8S_NAMESPACE: NAMESPACE,
    KUBECONFIG: cluster.server.kubeconfigPath,
    ACIS_GITHUB_API_URL: github.url,
    ACIS_ALLOW_FILE_REPOS: '1',
    ACIS_ALLOW_PLAIN_REPOS: '1',
    ACIS_REPOSITORY_ALLOW: '127.0.0.1',
    ACIS_SYNC_TIMEOUT_SECONDS: '77',
    ACIS_SYNC_REPORT_LISTEN: '127.0.0.1:0',
    // The listener's certificate names what the Jobs dial (the sync report Service's names, in a cluster).
    ACIS_SYNC_REPORT_TLS_NAMES: 'localhost',
  };
  t = await startTestServer(clusterEnv);
  // The deployment CA's certificate where the chart puts it for the controller to mount (the operator's
  // ConfigMap): Jobs verify the listener with it, and with nothing else.
  const caPem = await readFile(path.join(t.server.deps.config.deploymentCaDir, 'ca.crt'), 'utf8');
  cluster.server.store.create('configmaps', NAMESPACE, { metadata: { name: CA_CONFIGMAP }, data: { 'ca.crt': caPem } } as KubeObject);
  controller = await startTestController(cluster, {
    syncReportUrl: `https://localhost:${t.server.syncReport!.port}`,
    egressCaConfigMap: CA_CONFIGMAP,
    syncImage: SYNC_IMAGE,
    syncCommand: [process.execPath, '--import', `file://${path.join(nodeModules, 'tsx/dist/loader.mjs')}`, path.join(ROOT, 'cli/acis.ts')],
  });
  ({ serviceKey: key } = await t.createIntegration('reposync'));
  const credential = await t.request('POST', '/credentials', { token: key, body: { name: 'git', type: 'git_pat', secret: TOKEN } });
  credentialId = credential.body.id;
}, 120_000);
afterAll(async () => {
  await controller?.stop();
  await t?.stop();
  await cluster?.close();
  await git?.stop();
  await appGit?.stop();
  await github?.stop();
  await rm(root, { recursive: true, force: true });
});

const syncNameOf = (repositoryId: string) => repositoryId.toLowerCase().replace(/_/g, '-');
/** An object of the cluster, or undefined when there is none. */
function find(resource: string, name: string): any {
  try {
    return cluster.server.store.get(resource, NAMESPACE, name);
  } catch {
    return undefined;
  }
}
const reposync = (repositoryId: string) => find('repositorysyncs', syncNameOf(repositoryId));
const secretOf = (repositoryId: string, generation = 1) => find('secrets', `${syncNameOf(repositoryId)}-credential-${generation}`);
/** The credential a Secret delivers, decoded. */
const delivered = (secret: any) => JSON.parse(Buffer.from(secret.data.credential, 'base64').toString('utf8'));
const eventsOf = (repositoryId: string) =>
  cluster.server.store
    .list('events', NAMESPACE)
    .items.filter((e: any) => e.involvedObject?.kind === 'RepositorySync' && e.involvedObject?.name === syncNameOf(repositoryId));
/** The running pod of a RepositorySync generation's Job. */
const jobPod = (repositoryId: string, generation: number): any =>
  cluster.server.store
    .list('pods', NAMESPACE)
    .items.find((p: any) =>
      p.metadata.ownerReferences?.some((r: any) => r.kind === 'Job' && r.name === `${syncNameOf(repositoryId)}-${generation}`),
    );

async function register(
  password = credentialId,
  options: { server?: TestServer; gitServer?: GitHttpServer; provider?: string } = {},
): Promise<{ id: string; repo: Awaited<ReturnType<typeof createGitRepository>> }> {
  const repo = await createGitRepository(root, unique('skills'), { 'pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDFs.' }) });
  const body = {
    name: unique('repo'),
    repo_url: (options.gitServer ?? git).url(path.basename(repo.dir)),
    credential_id: password,
    ...(options.provider && { provider: options.provider }),
  };
  const res = await (options.server ?? t).request('POST', '/repositories', { token: key, body });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, repo };
}

describe('RepositorySync under the kubernetes sync runner', () => {
  it('a sync becomes a RepositorySync and a Job whose pod runs it; REST and the resource end ready at the same commit; the credential lives only while the Job runs', async () => {
    const release = git.hold();
    let id: string;
    try {
      ({ id } = await register());
      // The Job's git fetch is held at the server: the Secret exists now, mounted into that pod alone.
      await git.held();
      expect(reposync(id).spec).toMatchObject({
        repositoryId: id,
        requestGeneration: 1,
        credentialSecretName: `${syncNameOf(id)}-credential-1`,
      });
      expect(delivered(secretOf(id))).toEqual({ type: 'git_pat', secret: TOKEN });
      expect(Object.keys(secretOf(id).data).sort()).toEqual(['credential', 'token']);
      const job = find('jobs', `${syncNameOf(id)}-1`);
      expect(job.metadata.ownerReferences[0]).toMatchObject({ kind: 'RepositorySync', name: syncNameOf(id) });
      const podSpec = job.spec.template.spec;
      expect(podSpec.automountServiceAccountToken).toBe(false);
      expect(podSpec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      expect(JSON.stringify(job)).not.toContain(TOKEN);
      // The pod that runs git holds no database credential: neither in its environment nor in the Secret it mounts.
      const container = podSpec.containers[0];
      expect(container.env.map((e: any) => e.name)).not.toContain('DATABASE_URL');
      expect(container.env.filter((e: any) => e.valueFrom)).toEqual([]);
      expect(podSpec.volumes.filter((v: any) => v.secret).map((v: any) => v.secret.secretName)).toEqual([`${syncNameOf(id)}-credential-1`]);
      expect(JSON.stringify(jobPod(id, 1))).not.toContain(t.databaseUrl);
      expect(Buffer.from(secretOf(id).data.token, 'base64').toString()).not.toContain(t.databaseUrl);
      const again = await t.request('POST', `/repositories/${id}/sync`, { token: key });
      expect(again.status).toBe(409);
      expect(problemSlug(again)).toBe('sync-in-progress');
    } finally {
      release();
    }
    const ended = await syncEnded(t, key, id!);
    expect(ended.sync, JSON.stringify(ended.sync)).toMatchObject({ state: 'ready', error: null });
    expect(ended.skill_count).toBe(1);
    // Stored by the API server from the Job's report.
    expect(t.logs.some((line) => line.includes('sync result stored') && line.includes(id!))).toBe(true);
    const skills = await t.request('GET', `/repositories/${id!}/skills`, { token: key });
    expect(skills.body.data.map((s: any) => s.name)).toEqual(['pdf']);
    const commit = (await t.request('GET', `/repositories/${id!}/sync`, { token: key })).body.commit;
    const synced = await eventually(cluster, () => reposync(id!)?.status?.state === 'ready' && reposync(id!));
    expect(synced.status).toMatchObject({ state: 'ready', commit, shortCommit: commit.slice(0, 12), observedRequestGeneration: 1 });
    await eventually(cluster, () => secretOf(id!) === undefined);
    expect(
      eventsOf(id!)
        .map((e: any) => `${e.type} ${e.reason}`)
        .sort(),
    ).toEqual(['Normal JobCreated', 'Normal Synced']);

    const table = await kubectl(['get', 'reposync', syncNameOf(id!)], { kubeconfig: cluster.server.kubeconfigPath });
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'REPOSITORY', 'BRANCH', 'STATE', 'COMMIT', 'LAST-SYNCED', 'AGE']);
    expect(row!.split(/\s{2,}/).slice(0, 5)).toEqual([syncNameOf(id!), id!, 'main', 'ready', commit.slice(0, 12)]);
  });

  it('a re-sync bumps the generation and runs a new Job; a wrong credential ends in error with its reason, in REST and the resource', async () => {
    const wrong = await t.request('POST', '/credentials', {
      token: key,
      body: { name: unique('wrong'), type: 'git_pat', secret: 'ghp_wrongwrongwrongwrong' },
    });
    const { id } = await register(wrong.body.id);
    const failed = await syncEnded(t, key, id);
    expect(failed.sync.state, t.logs.filter((l) => l.includes('"level":50')).join('\n')).toBe('error');
    expect(failed.sync.error, t.logs.filter((l) => l.includes('"level":50')).join('\n')).not.toMatch(/platform side/);
    expect(failed.sync.error).toMatch(/^authentication failed/);
    const resource = await eventually(cluster, () => reposync(id)?.status?.state === 'error' && reposync(id));
    expect(resource.status.error).toBe(failed.sync.error);
    expect(resource.status.conditions[0]).toMatchObject({ type: 'Synced', status: 'False', reason: 'SyncFailed' });

    const patched = await t.request('PATCH', `/repositories/${id}`, { token: key, body: { credential_id: credentialId } });
    expect(patched.status, patched.text).toBe(200);
    expect((await t.request('POST', `/repositories/${id}/sync`, { token: key })).status).toBe(202);
    expect((await syncEnded(t, key, id)).sync.state).toBe('ready');
    const resynced = await eventually(cluster, () => reposync(id)?.status?.state === 'ready' && reposync(id));
    expect(resynced.spec.requestGeneration).toBe(2);
    expect(find('jobs', `${syncNameOf(id)}-2`)).toBeDefined();
    expect(eventsOf(id).map((e: any) => e.reason)).toContain('SyncFailed');
    await eventually(
      cluster,
      () => secretOf(id, 1) === undefined && secretOf(id, 2) === undefined && reposync(id).status.credentialRemovedGeneration === 2,
    );
    // Two whole syncs (real git, a Job each through the simulated cluster): beyond the default 30 s
    // only on a loaded machine, where it is slow rather than wrong.
  }, 90_000);

  it("a node that stops leaves its Job running; a Job killed before writing its outcome ends the sync with the cluster's reason", async () => {
    const release = git.hold();
    const other = await startTestServer({ ...clusterEnv, DATABASE_URL: t.databaseUrl, ACIS_MASTER_KEY: t.server.deps.config.masterKey! });
    let id: string;
    try {
      ({ id } = await register(credentialId, { server: other }));
      await git.held();
      await other.stop();
      // The handing node is gone for good as far as t can tell: before, its syncs were handed over again.
      t.clock.advance(5 * 60_000);
      await t.server.deps.repositorySync.recoverOrphans(false);
      expect(reposync(id).spec.requestGeneration).toBe(1);
      const pod = jobPod(id, 1);
      await cluster.kubelet.kill(NAMESPACE, pod.metadata.name);
      const failed = await eventually(cluster, () => reposync(id)?.status?.state === 'error' && reposync(id));
      expect(failed.status.error).toMatch(/^the sync job failed/);
      // The next heartbeat of any node settles the claim with that reason.
      await t.server.deps.repositorySync.recoverOrphans(false);
      const ended = (await t.request('GET', `/repositories/${id}/sync`, { token: key })).body;
      expect(ended).toMatchObject({ state: 'error', error: failed.status.error });
      await eventually(cluster, () => secretOf(id) === undefined);
    } finally {
      release();
    }
  });

  it('an attempt still syncing past the Job deadline is handed over again under a new generation; the stale one writes nothing', async () => {
    const release = git.hold();
    let id: string;
    try {
      ({ id } = await register());
      await git.held();
      t.clock.advance((600 + 120) * 1000 + 1000);
      expect(await t.server.deps.repositorySync.recoverOrphans(false)).toBe(1);
      const bumped = reposync(id);
      expect(bumped.spec.requestGeneration).toBe(2);
      expect(bumped.spec.credentialSecretName).toBe(`${syncNameOf(id)}-credential-2`);
      expect(secretOf(id, 2)).toBeDefined();
    } finally {
      release();
    }
    expect((await syncEnded(t, key, id!)).sync.state).toBe('ready');
    const synced = await eventually(cluster, () => reposync(id!)?.status?.state === 'ready' && reposync(id!));
    expect(synced.status.observedRequestGeneration).toBe(2);
    await eventually(cluster, () => secretOf(id!, 1) === undefined && secretOf(id!, 2) === undefined, 30_000);
  }, 90_000);

  it('a GitHub App credential reaches the Job as an installation token minted by the API server, never as the private key', async () => {
    const app = await t.request('POST', '/credentials', {
      token: key,
      body: {
        name: unique('app'),
        type: 'github_app',
        secret: JSON.stringify({ app_id: APP_ID, installation_id: INSTALLATION_ID, private_key: PRIVATE_KEY_PEM }),
      },
    });
    expect(app.status, app.text).toBe(201);
    const release = appGit.hold();
    let id: string;
    try {
      ({ id } = await register(app.body.id, { gitServer: appGit, provider: 'github' }));
      await appGit.held();
      const secret = secretOf(id);
      expect(delivered(secret)).toEqual({ type: 'oauth_token', secret: APP_TOKEN });
      expect(JSON.stringify(secret)).not.toContain(KEY_CANARY);
    } finally {
      release();
    }
    expect((await syncEnded(t, key, id!)).sync).toMatchObject({ state: 'ready', error: null });
    const dump = JSON.stringify(
      ['secrets', 'jobs', 'pods', 'repositorysyncs', 'events'].map((kind) => cluster.server.store.list(kind, NAMESPACE)),
    );
    expect(dump).not.toContain(KEY_CANARY);
    expect(t.logs.join('')).not.toContain(APP_TOKEN);
  });

  it('deleting the repository removes its RepositorySync, and with it its Jobs and Secrets', async () => {
    const { id } = await register();
    expect((await syncEnded(t, key, id)).sync.state).toBe('ready');
    expect(find('jobs', `${syncNameOf(id)}-1`)).toBeDefined();
    const deleted = await t.request('DELETE', `/repositories/${id}`, { token: key });
    expect(deleted.status, deleted.text).toBe(204);
    await eventually(cluster, () => reposync(id) === undefined && find('jobs', `${syncNameOf(id)}-1`) === undefined);
  });

  it("a file:// repository the API server allows syncs in its Job too: the Job runs with the API server's settings", async () => {
    const repo = await createGitRepository(root, unique('local'), {
      'pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDFs.' }),
    });
    const res = await t.request('POST', '/repositories', { token: key, body: { name: unique('repo'), repo_url: `file://${repo.dir}` } });
    expect(res.status, res.text).toBe(201);
    const ended = await syncEnded(t, key, res.body.id);
    expect(ended.sync, JSON.stringify(ended.sync)).toMatchObject({ state: 'ready', error: null });
    expect(ended.skill_count).toBe(1);
    expect(reposync(res.body.id).spec.settings).toEqual({
      allowFileRepos: true,
      allowPlainRepos: true,
      repositoryAllow: '127.0.0.1',
      timeoutSeconds: 77,
    });
    const env = find('jobs', `${syncNameOf(res.body.id)}-1`).spec.template.spec.containers[0].env;
    expect(env).toEqual(
      expect.arrayContaining([
        { name: 'ACIS_ALLOW_FILE_REPOS', value: '1' },
        { name: 'ACIS_ALLOW_PLAIN_REPOS', value: '1' },
        { name: 'ACIS_REPOSITORY_ALLOW', value: '127.0.0.1' },
        { name: 'ACIS_SYNC_TIMEOUT_SECONDS', value: '77' },
      ]),
    );
  });

  it('two repositories whose syncs store their content at the same moment, each in its Job pod, both end ready', async () => {
    // Held (by a lock on the skills table) between storing their content and cataloging their
    // skills, two attempts that took the content lock shared would both hold it there and then
    // deadlock when each asks for it exclusively to collect.
    const blocker = new pg.Client({ connectionString: t.databaseUrl });
    // Another connection watches: pg_stat_activity is read once per transaction, so the blocker's own would never change.
    const watcher = new pg.Client({ connectionString: t.databaseUrl });
    await Promise.all([blocker.connect(), watcher.connect()]);
    let first: string;
    let second: string;
    try {
      await blocker.query('begin');
      await blocker.query('lock table skills in share mode');
      [{ id: first }, { id: second }] = await Promise.all([register(), register()]);
      const waiting = async () =>
        (
          await watcher.query<{ n: number }>(
            `select count(distinct l.pid)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
             where not l.granted and a.datname = current_database()`,
          )
        ).rows[0]!.n;
      // Both attempts are in their apply transaction, each waiting on a lock (the table's, or the content lock).
      while ((await waiting()) < 2) await new Promise((resolve) => setTimeout(resolve, 25));
      await blocker.query('commit');
    } finally {
      await Promise.all([blocker.end(), watcher.end()]);
    }
    const ended = await Promise.all([syncEnded(t, key, first!), syncEnded(t, key, second!)]);
    for (const repository of ended) {
      expect(repository.sync, JSON.stringify(repository.sync)).toMatchObject({ state: 'ready', error: null });
      expect(repository.skill_count).toBe(1);
    }
    // Two syncs in Job pods side by side: beyond the default 30 s only on a loaded machine.
  }, 90_000);

  it('no object of the namespace holds the database URL: Jobs, pods, Secrets (decoded), RepositorySyncs, any other kind', async () => {
    const { id } = await register();
    expect((await syncEnded(t, key, id)).sync.state).toBe('ready');
    const database = new URL(t.databaseUrl);
    const objects = cluster.server.store.registry
      .all()
      .filter((type) => type.namespaced)
      .flatMap((type) => cluster.server.store.list(type, NAMESPACE).items);
    const decoded = objects
      .filter((object) => object.kind === 'Secret')
      .flatMap((secret) => Object.values((secret as { data?: Record<string, string> }).data ?? {}))
      .map((value) => Buffer.from(value, 'base64').toString());
    const dump = JSON.stringify([objects, decoded]);
    expect(dump).toContain(syncNameOf(id));
    expect(dump).not.toContain(t.databaseUrl);
    expect(dump).not.toContain(`${database.host}${database.pathname}`);
    expect(dump).not.toContain('DATABASE_URL');
  });

  it('the credential is in no status, kubectl output or API log', async () => {
    const all = await kubectl(['get', 'reposync', '-o', 'yaml'], { kubeconfig: cluster.server.kubeconfigPath });
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain('kind: RepositorySync');
    expect(all.stdout).not.toContain(TOKEN);
    expect(t.logs.join('')).not.toContain(TOKEN);
  });
});
