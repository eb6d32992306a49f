/**
 * Real git repositories for the sync suites and the bench's skills plane: built with the git CLI,
 * reachable as `file://` URLs or over smart HTTP (`git http-backend` behind a small Node server that
 * requires basic auth). Like the model stub, it stands where the outside world (a git host) stands.
 */
import { execFile, spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
};

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await exec('git', args, { cwd, env: GIT_ENV });
  return stdout.trim();
}

/** A file tree: path → content, or null to delete the path. */
export type Files = Record<string, string | null>;

export interface GitRepository {
  dir: string;
  fileUrl: string;
  /** Writes (or with null removes) files on `branch` (default main) and commits; answers the commit. */
  commit(files: Files, branch?: string): Promise<string>;
}

/** A non-bare repository at root/name with one commit of `files` on main. */
export async function createGitRepository(root: string, name: string, files: Files): Promise<GitRepository> {
  const dir = path.join(root, name);
  await mkdir(dir, { recursive: true });
  await git(dir, 'init', '--quiet', '--initial-branch=main');
  const repository: GitRepository = {
    dir,
    fileUrl: `file://${dir}`,
    async commit(changes, branch = 'main') {
      const current = await git(dir, 'rev-parse', '--abbrev-ref', 'HEAD').catch(() => 'main');
      if (current !== branch) {
        const exists = await git(dir, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`).then(
          () => true,
          () => false,
        );
        await git(dir, 'checkout', '--quiet', ...(exists ? [branch] : ['-b', branch]));
      }
      for (const [file, content] of Object.entries(changes)) {
        const target = path.join(dir, file);
        if (content === null) await rm(target, { recursive: true, force: true });
        else {
          await mkdir(path.dirname(target), { recursive: true });
          await writeFile(target, content);
        }
      }
      await git(dir, 'add', '--all');
      await git(dir, 'commit', '--quiet', '--allow-empty', '-m', 'change');
      return git(dir, 'rev-parse', 'HEAD');
    },
  };
  await repository.commit(files);
  return repository;
}

/** A SKILL.md with front matter. */
export function manifest(fields: Record<string, string>, body = 'Instructions.\n'): string {
  const lines = Object.entries(fields).map(([key, value]) => `${key}: ${value}`);
  return `---\n${lines.join('\n')}\n---\n${body}`;
}

export interface GitHttpServer {
  /** `http://127.0.0.1:port/<name>` for a repository under the served root. */
  url(name: string): string;
  /** Every request's method, path and the user it authenticated as (undefined: refused). */
  requests: Array<{ method: string; path: string; user: string | undefined; authorization: boolean }>;
  /** Holds every authenticated request until the returned release is called (keeps a sync in flight, whatever the machine's load). */
  hold(): () => void;
  /**
   * Resolves once a request is held (at once if one is), for the repository `name` when given (a
   * sync of another repository still running from an earlier test may be held too): proof that a
   * git process is alive and waiting on this server.
   */
  held(name?: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Serves every repository under `root` over smart HTTP, answering 401 unless the request carries
 * basic auth with `username` (any, when omitted) and `password`.
 */
export async function serveGitOverHttp(root: string, auth: { username?: string; password: string }): Promise<GitHttpServer> {
  const requests: GitHttpServer['requests'] = [];
  const state: { gate: Promise<void> | undefined; held: string[] } = { gate: undefined, held: [] };
  const heldEvents = new EventEmitter();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const user = authenticatedUser(req.headers.authorization, auth);
    requests.push({ method: req.method ?? 'GET', path: url.pathname, user, authorization: req.headers.authorization !== undefined });
    if (user === undefined) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' });
      res.end('authentication required');
      return;
    }
    const gate = state.gate;
    if (!gate) return backend(req, res, url, user);
    state.held.push(url.pathname);
    heldEvents.emit('held');
    void gate.then(() => {
      state.held.splice(state.held.indexOf(url.pathname), 1);
      backend(req, res, url, user);
    });
  });
  const backend = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, user: string) => {
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-length'] && { CONTENT_LENGTH: req.headers['content-length'] }),
        ...(req.headers['content-encoding'] && { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] }),
        ...(req.headers['git-protocol'] && { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
        REMOTE_USER: user,
        REMOTE_ADDR: '127.0.0.1',
      },
    });
    req.pipe(child.stdin);
    let head = Buffer.alloc(0);
    let headersSent = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headersSent) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      headersSent = true;
      res.write(head.subarray(end + 4));
    });
    child.on('close', () => {
      if (!headersSent) res.writeHead(500);
      res.end();
    });
  };
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
    requests,
    hold() {
      let release: () => void = () => {};
      state.gate = new Promise<void>((resolve) => (release = resolve));
      return () => {
        state.gate = undefined;
        release();
      };
    },
    held: async (name) => {
      const ofIt = () => state.held.some((held) => name === undefined || held.startsWith(`/${name}/`) || held.startsWith(`/${name}.git/`));
      while (!ofIt()) await once(heldEvents, 'held');
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function authenticatedUser(header: string | undefined, auth: { username?: string; password: string }): string | undefined {
  const match = /^Basic (.+)$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (password !== auth.password || (auth.username !== undefined && user !== auth.username)) return undefined;
  return user;
}
