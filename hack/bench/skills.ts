/**
 * The skills plane of `npm run bench`: what skill content stored in the database costs a run, and how
 * soon a push reaches the next run.
 *
 * - Materialising a run's skills from the database (`loadRunSkills`: one statement per repository,
 *   then the files written into the workspace as a runner does) beside copying the same directories from a checkout on
 *   local disk (what runs did before content moved to the database), interleaved rounds, for many small
 *   skills (per skill) and one large skill (per MB).
 * - From a signed GitHub push webhook to the pushed skill being in the content the next run reads,
 *   beside the same after a manual `POST /repositories/{id}/sync`, interleaved.
 *
 * ACIS runs in this process (its deps are used directly for materialising); the repository is served
 * over smart HTTP by real git. Environment: BENCH_SKILL_ROUNDS (default 30), BENCH_PUSHES (default 10).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { loadConfig } from '../../api-server/config.js';
import { createLogger, type RunningServer, startServer } from '../../api-server/server.js';
import { loadRunSkills, wireSkills } from '../../api-server/skills/materialise.js';
import { writeSkills } from '../../runner/workspace-ops.js';
import { createGitRepository, manifest, serveGitOverHttp } from '../git-server.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { percentile } from './stats.js';
import { envCount } from './env.js';

const log = (line: string) => console.error(`bench: skills: ${line}`);
const TOKEN = `ghp_${randomBytes(12).toString('hex')}`;
const WEBHOOK_SECRET = randomBytes(16).toString('hex');
const ADMIN_TOKEN = randomBytes(16).toString('hex');

const median = (values: number[]) => percentile(values, 0.5)!;
const p90 = (values: number[]) => percentile(values, 0.9)!;
const text = (bytes: number) =>
  randomBytes(Math.ceil((bytes * 3) / 4))
    .toString('base64')
    .slice(0, bytes);

interface SkillSet {
  label: string;
  files: Record<string, string>;
  skills: number;
  bytes: number;
}

function skillSet(label: string, skills: number, filesPerSkill: number, fileBytes: number): SkillSet {
  const files: Record<string, string> = {};
  for (let s = 0; s < skills; s++) {
    files[`${label}-${s}/SKILL.md`] = manifest({ name: `${label}-${s}`, description: `Bench skill ${s}.` });
    for (let f = 0; f < filesPerSkill; f++) files[`${label}-${s}/file-${f}.txt`] = text(fileBytes);
  }
  return { label, files, skills, bytes: Object.values(files).reduce((sum, content) => sum + Buffer.byteLength(content), 0) };
}

export async function runSkillsPlane(ctx: PlaneContext): Promise<PlaneResult> {
  const rounds = envCount('BENCH_SKILL_ROUNDS', 30);
  const pushes = envCount('BENCH_PUSHES', 10);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'acis-bench-skills-'));
  ctx.defer(() => rm(scratch, { recursive: true, force: true }));
  const git = await serveGitOverHttp(path.join(scratch, 'remotes'), { password: TOKEN });
  ctx.defer(() => git.stop());
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: await ctx.newDatabase(),
    ACIS_DATA_DIR: path.join(scratch, 'data'),
    ACIS_MASTER_KEY: randomBytes(32).toString('base64'),
    ACIS_ADMIN_TOKEN: ADMIN_TOKEN,
    ACIS_POOL_SIZE: '0',
    ACIS_RATE_LIMITS: 'off',
    LOG_LEVEL: 'warn',
  });
  const server = await startServer(config, { logger: createLogger(config) });
  ctx.defer(() => server.stop());
  const api = client(server);
  const integration = await api('POST', '/admin/integrations', { name: 'bench skills' }, ADMIN_TOKEN);
  const key = integration.service_key as string;
  const credential = await api('POST', '/credentials', { name: 'git', type: 'git_pat', secret: TOKEN }, key);
  await api('POST', '/credentials', { name: 'hook', type: 'github_webhook_secret', secret: WEBHOOK_SECRET }, key);

  const small = skillSet('small', 10, 4, 2_500);
  const large = skillSet('large', 1, 8, 1024 * 1024);
  const repo = await createGitRepository(path.join(scratch, 'remotes'), 'skills', { ...small.files, ...large.files });
  const repoUrl = git.url('skills');
  const registered = await api(
    'POST',
    '/repositories',
    { name: 'skills', repo_url: repoUrl, provider: 'github', credential_id: credential.id },
    key,
  );
  const repositoryId = registered.id as string;
  await until(async () => (await api('GET', `/repositories/${repositoryId}`, undefined, key)).sync.state === 'ready');
  const listed = await api('GET', `/repositories/${repositoryId}/skills?limit=100`, undefined, key);
  const idsOf = (label: string) =>
    (listed.data as Array<{ id: string; name: string }>).filter((s) => s.name.startsWith(`${label}-`)).map((s) => s.id);

  // The local-disk baseline copies from a checkout of the same commit, as runs did before.
  const checkout = path.join(scratch, 'checkout');
  await promisify(execFile)('git', ['clone', '--quiet', '--depth=1', repo.fileUrl, checkout]);
  const workspace = path.join(scratch, 'workspace');
  await mkdir(workspace, { recursive: true });
  const copyFromDisk = async (set: SkillSet) => {
    const target = path.join(workspace, '.claude', 'skills');
    await rm(target, { recursive: true, force: true });
    for (let s = 0; s < set.skills; s++)
      await cp(path.join(checkout, `${set.label}-${s}`), path.join(target, `${set.label}-${s}`), { recursive: true });
  };
  const fromDatabase = async (set: SkillSet) => {
    const skills = await loadRunSkills(server.deps, idsOf(set.label));
    if (skills.length !== set.skills) throw new Error(`materialised ${skills.length} of ${set.skills} ${set.label} skills`);
    await writeSkills(workspace, wireSkills(skills));
  };

  const rows: string[] = [];
  for (const set of [small, large]) {
    const database: number[] = [];
    const disk: number[] = [];
    for (let i = 0; i < 3; i++) {
      await fromDatabase(set);
      await copyFromDisk(set);
    }
    for (let i = 0; i < rounds; i++) {
      database.push(await timed(() => fromDatabase(set)));
      disk.push(await timed(() => copyFromDisk(set)));
    }
    const mb = set.bytes / (1024 * 1024);
    const unit = set.skills > 1 ? { per: 'skill', n: set.skills } : { per: 'MB', n: mb };
    rows.push(
      `| ${set.skills} skill(s), ${mb.toFixed(2)} MB | ${median(database).toFixed(2)} ms (${(median(database) / unit.n).toFixed(2)} ms/${unit.per}) | ${median(disk).toFixed(2)} ms (${(median(disk) / unit.n).toFixed(2)} ms/${unit.per}) | ${(median(database) / median(disk)).toFixed(2)} × |`,
    );
    log(`materialised ${set.label}: database ${median(database).toFixed(2)} ms, disk ${median(disk).toFixed(2)} ms`);
  }

  const viaWebhook: number[] = [];
  const viaSync: number[] = [];
  for (let i = 0; i < pushes; i++) {
    viaWebhook.push(
      await pushToOffered(`hook-${i}`, async (after) => {
        await deliver(server, pushBody(`${repoUrl}.git`, after));
      }),
    );
    viaSync.push(
      await pushToOffered(`manual-${i}`, async () => {
        await api('POST', `/repositories/${repositoryId}/sync`, undefined, key);
      }),
    );
  }
  log(`push to next run's content: webhook ${median(viaWebhook).toFixed(0)} ms, manual sync ${median(viaSync).toFixed(0)} ms`);

  async function pushToOffered(name: string, trigger: (after: string) => Promise<void>): Promise<number> {
    const after = await repo.commit({ [`${name}/SKILL.md`]: manifest({ name, description: 'Pushed.' }) });
    const started = performance.now();
    await trigger(after);
    await until(async () => {
      const ids = (await api('GET', `/repositories/${repositoryId}/skills?limit=100`, undefined, key)).data.map(
        (s: { id: string }) => s.id,
      );
      const skills = await loadRunSkills(server.deps, ids);
      return skills.some((skill) => skill.name === name);
    });
    return performance.now() - started;
  }

  const markdown = [
    '### Skills plane',
    '',
    `Skill content a run reads from the database (one statement per repository, then written into the workspace) beside a copy from a checkout on local disk, medians of ${rounds} interleaved rounds:`,
    '',
    '| skills | from the database | from local disk | ratio |',
    '|---|---|---|---|',
    ...rows,
    '',
    `A push to the pushed skill being in what the next run reads (median / p90 of ${pushes}): signed webhook ${median(viaWebhook).toFixed(0)} / ${p90(viaWebhook).toFixed(0)} ms, manual \`POST /sync\` ${median(viaSync).toFixed(0)} / ${p90(viaSync).toFixed(0)} ms (${(median(viaWebhook) / median(viaSync)).toFixed(2)} ×).`,
    '',
  ].join('\n');
  return { markdown, failures: [], files: [] };
}

function client(server: RunningServer) {
  // biome-ignore lint/suspicious/noExplicitAny: the JSON answer, read loosely by the bench
  return async (method: string, urlPath: string, body: unknown, token: string): Promise<any> => {
    const res = await fetch(`${server.url}${urlPath}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const parsed = await res.json().catch(() => undefined);
    if (res.status >= 300) throw new Error(`${method} ${urlPath}: ${res.status} ${JSON.stringify(parsed)}`);
    return parsed;
  };
}

function pushBody(cloneUrl: string, after: string) {
  return { ref: 'refs/heads/main', after, repository: { clone_url: cloneUrl } };
}

async function deliver(server: RunningServer, payload: unknown): Promise<void> {
  const raw = JSON.stringify(payload);
  const res = await fetch(`${server.url}/webhooks/github`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-github-delivery': randomBytes(8).toString('hex'),
      'x-hub-signature-256': `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('hex')}`,
    },
    body: raw,
  });
  if (res.status !== 202) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
}

async function timed(work: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function until(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
