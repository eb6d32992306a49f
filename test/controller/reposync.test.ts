/**
 * Repository syncs on the cluster: with ACIS_REPOSITORY_SYNC_RUNNER=kubernetes the API server claims
 * a sync and writes a RepositorySync (and the credential's Secret) instead of running git itself; the
 * controller runs it as a Job whose pod runs the real `acis sync-repository` (in bubblewrap, on the
 * simulated kubelet) against the real PostgreSQL and a git server that requires the credential. The
 * REST `sync` object and the RepositorySync's status tell the same outcome; the credential exists in
 * the cluster only while the Job runs and appears in no status, log or kubectl output.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningController } from '../../controller/controller.js';
import { ROOT } from '../helpers/acis-process.js';
import { createGitRepository, type GitHttpServer, manifest, serveGitOverHttp } from '../helpers/git-server.js';
import { kubectl } from '../helpers/kube-tools.js';
import { syncEnded, unique } from '../helpers/provision.js';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';
import { type Cluster, eventually, NAMESPACE, startCluster, startTestController } from './harness.js';

const SYNC_IMAGE = 'acis:test';
const TOKEN = `ghp_${'reposyncCanary'.repeat(2)}`;

let cluster: Cluster;
let controller: RunningController;
let t: TestServer;
let git: GitHttpServer;
let root: string;
let key: string;
let credentialId: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'acis-reposync-'));
  git = await serveGitOverHttp(root, { password: TOKEN });
  const nodeModules = realpathSync(path.join(ROOT, 'node_modules'));
  cluster = await startCluster({
    // The API server's image: the `acis` CLI from this checkout (its node_modules wherever they are).
    images: { [SYNC_IMAGE]: { command: process.execPath, binds: [ROOT, nodeModules] } },
  });
  t = await startTestServer({ ACIS_REPOSITORY_SYNC_RUNNER: 'kubernetes', ACIS_K8S_NAMESPACE: NAMESPACE, KUBECONFIG: cluster.server.kubeconfigPath });
  cluster.server.store.create('secrets', NAMESPACE, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'acis-database' },
    data: { DATABASE_URL: Buffer.from(t.databaseUrl).toString('base64') },
  });
  controller = await startTestController(cluster, {
    syncImage: SYNC_IMAGE,
    syncCommand: [process.execPath, '--import', `file://${path.join(nodeModules, 'tsx/dist/loader.mjs')}`, path.join(ROOT, 'api-server/main.ts')],
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
const secretOf = (repositoryId: string) => find('secrets', `${syncNameOf(repositoryId)}-credential`);

async function register(password = credentialId): Promise<{ id: string; repo: Awaited<ReturnType<typeof createGitRepository>> }> {
  const repo = await createGitRepository(root, unique('skills'), { 'pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDFs.' }) });
  const res = await t.request('POST', '/repositories', { token: key, body: { name: unique('repo'), repo_url: git.url(path.basename(repo.dir)), credential_id: password } });
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
      expect(reposync(id).spec).toMatchObject({ repositoryId: id, requestGeneration: 1, credentialSecretName: `${syncNameOf(id)}-credential` });
      expect(secretOf(id)).toBeDefined();
      const job = find('jobs', `${syncNameOf(id)}-1`);
      expect(job.metadata.ownerReferences[0]).toMatchObject({ kind: 'RepositorySync', name: syncNameOf(id) });
      const podSpec = job.spec.template.spec;
      expect(podSpec.automountServiceAccountToken).toBe(false);
      expect(podSpec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      expect(JSON.stringify(job)).not.toContain(TOKEN);
      const again = await t.request('POST', `/repositories/${id}/sync`, { token: key });
      expect(again.status).toBe(409);
      expect(problemSlug(again)).toBe('sync-in-progress');
    } finally {
      release();
    }
    const ended = await syncEnded(t, key, id!);
    expect(ended.sync, JSON.stringify(ended.sync)).toMatchObject({ state: 'ready', error: null });
    expect(ended.skill_count).toBe(1);
    const commit = (await t.request('GET', `/repositories/${id!}/sync`, { token: key })).body.commit;
    const synced = await eventually(cluster, () => reposync(id!)?.status?.state === 'ready' && reposync(id!));
    expect(synced.status).toMatchObject({ state: 'ready', commit, shortCommit: commit.slice(0, 12), observedRequestGeneration: 1 });
    await eventually(cluster, () => secretOf(id!) === undefined);

    const table = await kubectl(['get', 'reposync', syncNameOf(id!)], { kubeconfig: cluster.server.kubeconfigPath });
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'REPOSITORY', 'BRANCH', 'STATE', 'COMMIT', 'LAST-SYNCED', 'AGE']);
    expect(row!.split(/\s{2,}/).slice(0, 5)).toEqual([syncNameOf(id!), id!, 'main', 'ready', commit.slice(0, 12)]);
  });

  it('a re-sync bumps the generation and runs a new Job; a wrong credential ends in error with its reason, in REST and the resource', async () => {
    const wrong = await t.request('POST', '/credentials', { token: key, body: { name: unique('wrong'), type: 'git_pat', secret: 'ghp_wrongwrongwrongwrong' } });
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
  });

  it('the credential is in no status, kubectl output or API log', async () => {
    const all = await kubectl(['get', 'reposync', '-o', 'yaml'], { kubeconfig: cluster.server.kubeconfigPath });
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain('kind: RepositorySync');
    expect(all.stdout).not.toContain(TOKEN);
    expect(t.logs.join('')).not.toContain(TOKEN);
  });
});
