/**
 * A real OpenSSH server for the sync suites: `sshd` in the foreground on a loopback port, with a
 * host key and one authorised client key made for the test, so git reaches repositories over SSH as
 * it does on a real host. It logs in as the user running the tests (public key only).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './acis-process.js';

const exec = promisify(execFile);
const SSHD = '/usr/sbin/sshd';

export interface SshServer {
  port: number;
  user: string;
  /** The private key (OpenSSH format) the server accepts. */
  clientKey: string;
  /** `ssh://user@127.0.0.1:port/<absolute path>` for a repository on this machine. */
  url(repositoryDir: string): string;
  stop(): Promise<void>;
}

async function keyPair(file: string): Promise<{ privateKey: string; publicKey: string }> {
  await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'acis-test', '-f', file]);
  return { privateKey: await readFile(file, 'utf8'), publicKey: await readFile(`${file}.pub`, 'utf8') };
}

export async function startSshServer(): Promise<SshServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'acis-sshd-'));
  // sshd's privilege separation directory (root only; an unprivileged sshd does without it).
  if (process.getuid?.() === 0) await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  await keyPair(path.join(dir, 'host_ed25519'));
  const client = await keyPair(path.join(dir, 'client_ed25519'));
  await writeFile(path.join(dir, 'authorized_keys'), client.publicKey, { mode: 0o600 });
  const port = await freePort();
  const config = [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${dir}/host_ed25519`,
    `PidFile ${dir}/sshd.pid`,
    `AuthorizedKeysFile ${dir}/authorized_keys`,
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password',
    'UsePAM no',
    // The test's temporary directories are not owned the way StrictModes wants.
    'StrictModes no',
    `SetEnv PATH=${process.env.PATH ?? '/usr/bin:/bin'}`,
  ];
  await writeFile(path.join(dir, 'sshd_config'), `${config.join('\n')}\n`);
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr?.on('data', (chunk) => (output += chunk));
  for (const deadline = Date.now() + 10_000; ; ) {
    if (child.exitCode !== null) throw new Error(`sshd exited with ${child.exitCode}: ${output}`);
    const listening = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ port, host: '127.0.0.1' }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (listening) break;
    if (Date.now() > deadline) throw new Error(`sshd did not listen on ${port}: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const user = os.userInfo().username;
  return {
    port,
    user,
    clientKey: client.privateKey,
    url: (repositoryDir) => `ssh://${user}@127.0.0.1:${port}${repositoryDir}`,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
