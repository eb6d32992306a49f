/**
 * A sync's git goes where the remote policy looked: the addresses vetted right before the fetch are
 * handed to git (curl's resolve list over HTTP, ssh's HostName over SSH), so a name answering one
 * address to the check and another to git (DNS rebinding) cannot steer git elsewhere; a name that
 * resolves to nothing at fetch time is refused; and a redirect, which would lead git to a host
 * never vetted, is not followed.
 *
 * The name is under `.invalid` (RFC 6761: never resolves), answered only by the policy's resolver:
 * git reaching the repository at all proves it used the vetted address and asked no DNS itself.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RepositoryCheckouts } from '../../api-server/repositories/checkouts.js';
import type { GitCredential } from '../../api-server/repositories/git.js';
import { remotePolicy } from '../../api-server/repositories/remote-policy.js';
import { type AttemptRepository, fetchAttempt } from '../../api-server/repositories/sync-attempt.js';
import type { ResolvedAddress } from '../../egress-proxy/destination-policy.js';
import { createGitRepository, type GitHttpServer, type GitRepository, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { startSshServer } from '../helpers/ssh-server.js';

const NAME = 'skills.rebind.invalid';
const TOKEN = 'pin-test-token-0123456789';
const SKILLS = { 'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDFs.' }) };

let root: string;
let git: GitHttpServer;
let repo: GitRepository;
let head: string;
let checkouts: RepositoryCheckouts;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'acis-remote-pin-'));
  git = await serveGitOverHttp(path.join(root, 'served'), { password: TOKEN });
  repo = await createGitRepository(path.join(root, 'served'), 'skills', SKILLS);
  head = await repo.commit({ 'README.md': 'pinned\n' });
  checkouts = new RepositoryCheckouts(path.join(root, 'checkouts'));
});

afterAll(async () => {
  await git?.stop();
  await rm(root, { recursive: true, force: true });
});

/** The policy of a deployment allowing NAME and 127.0.0.1 (private addresses), with a resolver answering `answer` for NAME. */
function attempt(repoUrl: string, answer: string[], credential: GitCredential | undefined, knownHosts?: string) {
  const resolve = async (host: string): Promise<ResolvedAddress[]> =>
    host === NAME ? answer.map((address) => ({ address, family: 4 as const })) : [];
  const remotes = remotePolicy({ allowFileRepos: false, allowPlainRepos: true, repositoryAllow: `${NAME},127.0.0.1` }, resolve);
  const repository: AttemptRepository = {
    id: `rep_${Math.random().toString(36).slice(2)}`,
    repo_url: repoUrl,
    branch: 'main',
    provider: 'generic',
    credential_id: null,
    ssh_known_hosts: knownHosts ?? null,
  };
  return fetchAttempt(
    {
      gitCredential: async () => credential,
      checkouts,
      remotes,
      timeoutMs: 30_000,
      signal: new AbortController().signal,
      onUnexpected: (error) => {
        throw error;
      },
    },
    repository,
  );
}

const portOf = (url: string) => new URL(url).port;

describe('git connects to the addresses the remote policy vetted', () => {
  it('over HTTP: a name no DNS knows is fetched at the address the check saw', async () => {
    const result = await attempt(`http://${NAME}:${portOf(git.url('skills'))}/skills`, ['127.0.0.1'], { type: 'git_pat', secret: TOKEN });
    expect(result).toMatchObject({ state: 'fetched', commit: head });
  });

  it('a name that resolves to nothing right before the fetch is refused, and git asks nothing', async () => {
    const before = git.requests.length;
    const result = await attempt(`http://${NAME}:${portOf(git.url('skills'))}/skills`, [], { type: 'git_pat', secret: TOKEN });
    expect(result).toEqual({ state: 'error', error: `host unreachable: ${NAME} does not resolve` });
    expect(git.requests.length).toBe(before);
  });

  it('a redirect is not followed: git never reaches the host it points to', async () => {
    const before = git.requests.length;
    const redirector = http.createServer((req, res) => {
      res.writeHead(301, { location: `${git.url('skills')}${req.url?.replace(/^\/moved/, '') ?? ''}` });
      res.end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    try {
      const port = (redirector.address() as AddressInfo).port;
      const result = await attempt(`http://127.0.0.1:${port}/moved`, [], { type: 'git_pat', secret: TOKEN });
      expect(result).toMatchObject({ state: 'error', error: expect.stringMatching(/301/) });
      expect(git.requests.length).toBe(before);
    } finally {
      await new Promise((resolve) => redirector.close(resolve));
    }
  });

  it('over SSH: ssh connects to the vetted address and pins the host key under the URL’s name', async () => {
    const sshd = await startSshServer();
    try {
      const url = `ssh://${sshd.user}@${NAME}:${sshd.port}${repo.dir}`;
      const first = await attempt(url, ['127.0.0.1'], { type: 'git_ssh_key', secret: sshd.clientKey });
      expect(first).toMatchObject({ state: 'fetched', commit: head });
      const knownHosts = first.state === 'fetched' ? first.knownHosts : undefined;
      expect(knownHosts).toMatch(new RegExp(`^\\[${NAME.replaceAll('.', '\\.')}\\]:${sshd.port} ssh-ed25519 `));
      const again = await attempt(url, ['127.0.0.1'], { type: 'git_ssh_key', secret: sshd.clientKey }, knownHosts);
      expect(again).toMatchObject({ state: 'fetched', commit: head });
    } finally {
      await sshd.stop();
    }
  });
});
