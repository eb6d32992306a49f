/**
 * hack/kind-up.sh without Docker or kind: `bash -n`, then the script run by bash with a PATH of its
 * tools as stand-ins (small scripts that log their arguments and answer as the real ones do for the
 * calls it makes: `kubectl auth can-i` prints yes or no and exits 0 or 1, a port-forward blocks) and
 * the few system utilities it uses. It checks every tool up front (curl too), builds with BuildKit,
 * warns when no network plugin watches NetworkPolicies, and waits for /readyz within its bound.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/acis-process.js';

const SCRIPT = path.join(ROOT, 'hack', 'kind-up.sh');
const TOOLS = ['docker', 'kind', 'kubectl', 'helm', 'openssl', 'curl', 'npm'];
const UTILITIES = ['dirname', 'grep', 'sort', 'base64', 'sleep', 'cat'];
const BASH = '/bin/bash';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  calls: string[];
}

/** What each stand-in answers; `$*` is its arguments. Everything else succeeds silently. */
function standIn(tool: string, options: { enforcer: boolean; ready: boolean }): string {
  const answers: Record<string, string> = {
    docker: `case "$*" in "buildx version") echo "github.com/docker/buildx v0.20.0" ;; esac`,
    kind: `case "$*" in "get clusters") echo acis ;; esac`,
    kubectl: [
      'case "$*" in',
      '  "get daemonsets --all-namespaces"*) printf "kube-system:kindnet\\nkube-system:kube-proxy\\n" ;;',
      `  "auth can-i"*"system:serviceaccount:kube-system:kindnet"*) ${options.enforcer ? 'echo yes' : 'echo no; exit 1'} ;;`,
      '  "auth can-i"*) echo no; exit 1 ;;',
      '  *port-forward*) exec sleep 30 ;;',
      'esac',
    ].join('\n'),
    openssl: 'echo 0123456789abcdef0123456789abcdef',
    curl: options.ready ? 'exit 0' : 'exit 7',
  };
  return `#!${BASH}\necho "${tool} $*" >> "$CALLS"\n${answers[tool] ?? ''}\n`;
}

describe('hack/kind-up.sh', () => {
  let bin: string;
  let calls: string;

  beforeEach(async () => {
    bin = await mkdtemp(path.join(tmpdir(), 'acis-kind-up-'));
    calls = path.join(bin, 'calls.log');
    await writeFile(calls, '');
    for (const utility of UTILITIES) await symlink(path.join('/usr/bin', utility), path.join(bin, utility));
  });

  afterEach(async () => {
    await rm(bin, { recursive: true, force: true });
  });

  async function installTools(options: { enforcer: boolean; ready: boolean }, without?: string): Promise<void> {
    for (const tool of TOOLS.filter((name) => name !== without)) {
      await writeFile(path.join(bin, tool), standIn(tool, options));
      await chmod(path.join(bin, tool), 0o755);
    }
  }

  function run(env: Record<string, string> = {}): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(BASH, [SCRIPT], { env: { PATH: bin, CALLS: calls, ACIS_READY_TIMEOUT: '2', ...env } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.on('error', reject);
      child.on('close', async (code) => {
        const logged = (await readFile(calls, 'utf8')).split('\n').filter(Boolean);
        resolve({ code, stdout, stderr, calls: logged });
      });
    });
  }

  it('parses (bash -n)', async () => {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(BASH, ['-n', SCRIPT]);
      let stderr = '';
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(result).toEqual({ code: 0, stderr: '' });
  });

  it.each(TOOLS)('stops before doing anything when %s is missing, naming it', async (missing) => {
    await installTools({ enforcer: true, ready: true }, missing);
    const result = await run();
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`kind-up: ${missing} is needed on PATH\n`);
    expect(result.calls).toEqual([]);
  });

  it("stops when Docker has no buildx (BuildKit), which the model stub's own ignore file needs", async () => {
    await installTools({ enforcer: true, ready: true });
    await writeFile(path.join(bin, 'docker'), `#!${BASH}\necho "docker $*" >> "$CALLS"\nexit 1\n`);
    const result = await run();
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("kind-up: Docker's buildx (BuildKit) is needed");
    expect(result.calls).toEqual(['docker buildx version']);
  });

  it('builds every image with BuildKit, waits for /readyz, and runs the demo; no warning where a plugin watches NetworkPolicies', async () => {
    await installTools({ enforcer: true, ready: true });
    const result = await run();
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('NetworkPolicies');
    const builds = result.calls.filter((call) => call.startsWith('docker ') && call.includes('build'));
    expect(builds.filter((call) => call.startsWith('docker buildx build --load '))).toHaveLength(3);
    expect(builds.filter((call) => !call.startsWith('docker buildx'))).toEqual([]);
    const curl = result.calls.findIndex((call) => call.startsWith('curl ') && call.includes('/readyz'));
    const demo = result.calls.indexOf('npm run demo');
    expect(curl).toBeGreaterThanOrEqual(0);
    expect(demo).toBeGreaterThan(curl);
  });

  it('warns when no network plugin watches NetworkPolicies, and fails naming the bound when the API is never ready', async () => {
    await installTools({ enforcer: false, ready: false });
    const started = Date.now();
    const result = await run();
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('kind-up: warning: no network plugin of this cluster seems to enforce NetworkPolicies');
    expect(result.stderr).toContain('kind-up: the API was not ready within 2 s (GET /readyz through the port-forward)');
    // Both accounts of the DaemonSets asked, and the demo never started.
    expect(result.calls.filter((call) => call.startsWith('kubectl auth can-i watch networkpolicies'))).toHaveLength(2);
    expect(result.calls).not.toContain('npm run demo');
    expect(result.calls.filter((call) => call.startsWith('curl ')).length).toBeGreaterThanOrEqual(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
  });
});
