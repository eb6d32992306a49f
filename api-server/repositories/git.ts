/**
 * Runs git for repository syncs, with the vaulted credential.
 *
 * Invariant: a credential reaches git only through the child's environment: over HTTPS an askpass
 * helper prints it from an environment variable when git asks (so git sends it only where the server
 * asks for it, and never in the URL or argv); over SSH it is a key file (mode 0600, in a private
 * temporary directory removed afterwards) named in GIT_SSH_COMMAND. The process list therefore shows
 * paths, never the value, and every message taken from git's stderr is scrubbed of it besides.
 * No system or user git configuration is read, and git never prompts.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RemotePin } from './remote-policy.js';
import { classifyRepoUrl } from './repositories.schemas.js';

/** A git failure with a reason fit for `sync.error`: short, actionable, free of credentials. */
export class GitError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'GitError';
  }
}

export interface GitCredential {
  type: string;
  secret: string;
}

export interface GitRemote {
  url: string;
  provider: string;
  credential: GitCredential | undefined;
  /** Over SSH: the host keys (known_hosts lines) the server must present; absent: the first seen is accepted and recorded. */
  knownHosts?: string | undefined;
  /** The addresses the remote policy vetted for the URL's host: git connects to these, never resolving the name itself. */
  pin?: RemotePin | undefined;
}

/** The environment of one git session and what to remove once it is over. */
export interface GitSession {
  env: Record<string, string>;
  /** Values to scrub from anything git says. */
  secrets: string[];
  /** Over SSH: the host keys the server presented (known_hosts lines), once a connection was made. */
  knownHosts(): Promise<string | undefined>;
  close(): Promise<void>;
}

const ASKPASS = `#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$ACIS_GIT_USERNAME" ;;
  *) printf '%s\\n' "$ACIS_GIT_PASSWORD" ;;
esac
`;

/** The user name hosts expect beside a token (GitHub and Azure accept any; GitLab and Bitbucket want these). */
function tokenUsername(provider: string): string {
  switch (provider) {
    case 'gitlab':
      return 'oauth2';
    case 'bitbucket':
      return 'x-token-auth';
    default:
      return 'x-access-token';
  }
}

type Transport = 'http' | 'ssh' | 'git' | 'file';

function transportOf(url: string): Transport {
  const kind = classifyRepoUrl(url);
  if ('kind' in kind && kind.kind === 'file') return 'file';
  if (!url.includes('://')) return 'ssh';
  const protocol = new URL(url).protocol;
  if (protocol === 'ssh:') return 'ssh';
  if (protocol === 'git:') return 'git';
  return 'http';
}

/**
 * Prepares the environment git runs in for one remote. Token types (`git_pat`, `oauth_token` and any
 * other non-SSH type) are the password of HTTPS basic auth beside the provider's customary user name;
 * `basic_auth` is `user:password`; `git_ssh_key` is a private key for SSH remotes.
 */
export async function openGitSession(remote: GitRemote): Promise<GitSession> {
  const dir = await mkdtemp(path.join(tmpdir(), 'acis-git-'));
  const close = () => rm(dir, { recursive: true, force: true });
  try {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      // English messages, so failures can be explained (see explainFailure).
      LANG: 'C',
      LC_ALL: 'C',
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      // A transfer slower than 1 KB/s for 30 s is abandoned rather than held until the sync timeout.
      GIT_HTTP_LOW_SPEED_LIMIT: '1000',
      GIT_HTTP_LOW_SPEED_TIME: '30',
      ...gitConfigEnv(httpConfig(remote.pin)),
    };
    const credential = remote.credential;
    const transport = transportOf(remote.url);
    const secrets: string[] = [];
    const knownHostsFile = path.join(dir, 'known_hosts');
    const knownHosts = async () =>
      transport === 'ssh' ? (await readFile(knownHostsFile, 'utf8').catch(() => '')).trim() || undefined : undefined;
    if (transport === 'ssh') {
      if (credential && credential.type !== 'git_ssh_key') {
        throw new GitError(`a ${credential.type} credential cannot authenticate an ssh remote; use a git_ssh_key credential`);
      }
      if (remote.knownHosts) await writeFile(knownHostsFile, `${remote.knownHosts.trim()}\n`, { mode: 0o600 });
      const options = [
        '-F /dev/null',
        '-o BatchMode=yes',
        '-o ConnectTimeout=15',
        // Pinned per repository: the keys recorded at its first sync are required; before that, the
        // first key seen is accepted and the sync records it (trust on first use).
        `-o StrictHostKeyChecking=${remote.knownHosts ? 'yes' : 'accept-new'}`,
        '-o HashKnownHosts=no',
        `-o UserKnownHostsFile=${knownHostsFile}`,
        ...sshPinOptions(remote.pin),
      ];
      if (credential) {
        const keyFile = path.join(dir, 'id_key');
        // OpenSSH refuses a key file without its final newline.
        await writeFile(keyFile, `${credential.secret.trimEnd()}\n`, { mode: 0o600 });
        options.push(`-i ${keyFile}`, '-o IdentitiesOnly=yes');
        secrets.push(credential.secret.trim());
      }
      env.GIT_SSH_COMMAND = `ssh ${options.join(' ')}`;
    } else if (credential && transport === 'http') {
      if (credential.type === 'git_ssh_key') {
        throw new GitError('a git_ssh_key credential needs an ssh remote (ssh://... or user@host:path)');
      }
      let username = tokenUsername(remote.provider);
      let password = credential.secret;
      const colon = credential.secret.indexOf(':');
      if (credential.type === 'basic_auth' && colon > 0) {
        username = credential.secret.slice(0, colon);
        password = credential.secret.slice(colon + 1);
      }
      const askpass = path.join(dir, 'askpass.sh');
      await writeFile(askpass, ASKPASS, { mode: 0o700 });
      Object.assign(env, { GIT_ASKPASS: askpass, ACIS_GIT_USERNAME: username, ACIS_GIT_PASSWORD: password });
      secrets.push(credential.secret, password, Buffer.from(`${username}:${password}`).toString('base64'));
    }
    return { env, secrets: secrets.filter((s) => s.length > 0), knownHosts, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Over HTTP(S): a redirect is not followed (it would lead git to a host the remote policy never
 * vetted), and with a pin curl takes the vetted addresses for the URL's host and port instead of
 * resolving it (`http.curloptResolve`, git-config(1); TLS still verifies the name).
 */
function httpConfig(pin: RemotePin | undefined): Record<string, string> {
  const config: Record<string, string> = { 'http.followRedirects': 'false' };
  if (pin) {
    const addresses = pin.addresses.map((address) => (isIP(address) === 6 ? `[${address}]` : address));
    config['http.curloptResolve'] = `${pin.host}:${pin.port}:${addresses.join(',')}`;
  }
  return config;
}

/** Configuration through the environment (git ≥ 2.31), so nothing lands in a file or argv. */
function gitConfigEnv(config: Record<string, string>): Record<string, string> {
  const entries = Object.entries(config);
  const numbered = entries.flatMap(([key, value], i) => [
    [`GIT_CONFIG_KEY_${i}`, key],
    [`GIT_CONFIG_VALUE_${i}`, value],
  ]);
  return { GIT_CONFIG_COUNT: String(entries.length), ...Object.fromEntries(numbered) };
}

/**
 * Over SSH with a pin: ssh connects to the first vetted address, and keeps looking the host key up
 * under the name it would have used for the URL's host (`[host]:port` off port 22, ssh_config(5)
 * HostKeyAlias), so keys pinned before are still the ones required.
 */
function sshPinOptions(pin: RemotePin | undefined): string[] {
  if (!pin) return [];
  const alias = pin.port === 22 ? pin.host : `[${pin.host}]:${pin.port}`;
  return [`-o HostName=${pin.addresses[0]}`, `-o HostKeyAlias=${alias}`];
}

export interface GitRunOptions {
  session: GitSession;
  cwd?: string;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  extraEnv?: Record<string, string>;
}

/** Runs one git command; its stdout on success, a GitError with an explained reason otherwise. */
export function runGit(args: string[], options: GitRunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new GitError('the sync was stopped (the server is shutting down)'));
      return;
    }
    const child = spawn('git', args, {
      cwd: options.cwd,
      env: { ...options.session.env, ...options.extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let stopped: string | undefined;
    const stop = (why: string) => {
      stopped ??= why;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(`git timed out after ${Math.round(options.timeoutMs / 1000)} s`), options.timeoutMs);
    const onAbort = () => stop('the sync was stopped (the server is shutting down)');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 64) stderr.push(chunk);
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(new GitError(`git could not be started: ${error.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (stopped) reject(new GitError(stopped));
      else if (code === 0) resolve(Buffer.concat(stdout).toString('utf8'));
      else reject(new GitError(explainFailure(scrub(Buffer.concat(stderr).toString('utf8'), options.session.secrets))));
    });
  });
}

/** Replaces every credential value (and anything URL-embedded) in git's output. */
export function scrub(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join('[redacted]');
  return out.replace(/(\/\/)[^/@\s]+@/g, '$1[redacted]@');
}

/** Turns git's stderr into a reason: authentication, a missing branch or repository, an unreachable host. */
export function explainFailure(stderr: string): string {
  const text = stderr.replace(/\r/g, '\n');
  const detail = firstFatalLine(text);
  const has = (pattern: RegExp) => pattern.test(text);
  if (has(/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed|No (ED25519|RSA|ECDSA)? ?host key is known/i)) {
    return `host key changed: the SSH server did not present the host key pinned at the repository's first sync (a changed server, or someone in between); if the change is expected, register the repository again (${detail})`;
  }
  if (has(/could not read (Username|Password)|terminal prompts disabled/i)) {
    return `authentication required: the remote asked for credentials (${detail})`;
  }
  if (
    has(
      /Authentication failed|HTTP Basic: Access denied|Permission denied \(|returned error: 40[13]|Invalid username or password|access denied/i,
    )
  ) {
    return `authentication failed: the remote refused the credential (${detail})`;
  }
  if (has(/couldn't find remote ref|Remote branch .* not found|no such ref/i)) return `branch not found (${detail})`;
  if (
    has(
      /Could not resolve host|Could not resolve hostname|Connection refused|Connection timed out|Failed to connect|Network is unreachable|No route to host|Operation timed out|Connection reset|connect to host/i,
    )
  ) {
    return `host unreachable (${detail})`;
  }
  if (has(/Repository not found|does not appear to be a git repository|not found|returned error: 404|does not exist/i)) {
    return `repository not found (${detail})`;
  }
  return `git failed: ${detail}`;
}

function firstFatalLine(text: string): string {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const line = lines.find((l) => /^(fatal|error):/i.test(l)) ?? lines.at(-1) ?? 'no output';
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}
