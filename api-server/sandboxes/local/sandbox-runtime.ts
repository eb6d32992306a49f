/**
 * Whether this machine can start sandboxed runners: the bubblewrap binary is there and can build the
 * runner's sandbox (its user, pid, network and other namespaces). Checked once at start by running
 * the runner's own recipe around `true`; a machine that fails it serves the API but fails every
 * message at once with the reason, instead of letting turns hang on a runner that never starts.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { bwrapCommand } from '../../../runner/bwrap.js';

const PROBE_TIMEOUT_MS = 15_000;

const INSTALL_HINT =
  'Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; ' +
  'Alpine: `apk add bubblewrap`), or name the binary with ACIS_BWRAP_PATH.';

const USERNS_HINT =
  'Unprivileged user namespaces must be allowed: `sysctl kernel.unprivileged_userns_clone=1` on older Debian, ' +
  '`sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for bwrap) on Ubuntu 23.10 and later, ' +
  '`user.max_user_namespaces` above 0; in a container, a seccomp/AppArmor profile that permits them.';

export type SandboxRuntime = { ok: true; bwrapPath: string } | { ok: false; reason: string };

/**
 * Finds bubblewrap (`configured`: ACIS_BWRAP_PATH, a path or a name looked up on PATH) and starts an
 * empty sandbox with the runner's recipe in `scratchDir` (created and removed here).
 */
export async function checkSandboxRuntime(
  configured: string,
  scratchDir: string,
  searchPath = process.env.PATH ?? '',
): Promise<SandboxRuntime> {
  const bwrapPath = await findExecutable(configured, searchPath);
  if (!bwrapPath) {
    const where = configured.includes('/') ? `at ${configured} (ACIS_BWRAP_PATH)` : `on PATH (${searchPath || 'empty'})`;
    return { ok: false, reason: `The sandbox runtime is missing: no executable bubblewrap (${configured}) ${where}. ${INSTALL_HINT}` };
  }
  const dirs = { workspace: path.join(scratchDir, 'workspace'), home: path.join(scratchDir, 'home') };
  await mkdir(dirs.workspace, { recursive: true });
  await mkdir(dirs.home, { recursive: true });
  try {
    const { args, env } = bwrapCommand({ ...dirs, runtimeDirs: [], command: ['true'] });
    const failure = await new Promise<string | undefined>((resolve) => {
      execFile(bwrapPath, args, { env, timeout: PROBE_TIMEOUT_MS, encoding: 'utf8' }, (error, _stdout, stderr) => {
        if (!error) resolve(undefined);
        else resolve((stderr.trim() || error.message).split('\n').slice(-3).join(' '));
      });
    });
    if (failure === undefined) return { ok: true, bwrapPath };
    return {
      ok: false,
      reason: `The sandbox runtime cannot start: ${bwrapPath} failed to create a runner's sandbox (${failure}). ${USERNS_HINT}`,
    };
  } finally {
    await rm(scratchDir, { recursive: true, force: true });
  }
}

async function findExecutable(name: string, searchPath: string): Promise<string | undefined> {
  const candidates = name.includes('/')
    ? [path.resolve(name)]
    : searchPath
        .split(':')
        .filter(Boolean)
        .map((dir) => path.join(dir, name));
  for (const candidate of candidates) {
    const executable = await access(candidate, constants.X_OK).then(
      async () => (await stat(candidate)).isFile(),
      () => false,
    );
    if (executable) return candidate;
  }
  return undefined;
}
