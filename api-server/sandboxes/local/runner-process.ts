/**
 * How the local provider starts a runner: the process, its arguments and its whole environment, in
 * a bubblewrap sandbox (runner/bwrap.ts) or, for debugging, unsandboxed. The environment is the runner's
 * contract with its host: the model endpoint only through the gateway's socket (the platform's key
 * never enters: the gateway replaces the placeholder, for a runner with a run in progress), every HTTP(S) client pointed at the egress
 * proxy with the runner's own credential and trusting the proxy's CA, the transcript mirrored to the
 * API server's store, and, for a pool runner, the agent runtime prewarmed.
 */
import path from 'node:path';
import { MODEL_KEY_ALIAS } from '../../../egress-proxy/model-endpoint.js';
import { placeholderFor } from '../../../egress-proxy/placeholder.js';
import { bwrapCommand, runnerCommand, SANDBOX_HOME, SANDBOX_RUN } from '../../../runner/bwrap.js';

/** The loopback port inside a sandbox where the runner bridges to the egress proxy. */
const SANDBOX_PROXY_PORT = 3128;
/** The platform's key never enters a sandbox: the model gateway replaces this placeholder on the way out. */
const MODEL_KEY_PLACEHOLDER = placeholderFor(MODEL_KEY_ALIAS);

export interface LocalRunnerProcessOptions {
  /** The package root (the runner's source, or its compiled build, and node_modules). */
  appRoot: string;
  /** Start the compiled runner (dist/) rather than the TypeScript through a loader. */
  compiled: boolean;
  isolation: 'bwrap' | 'none';
  bwrapPath: string;
  dirs: { root: string; workspace: string; home: string };
  /** The host directory every sandbox sees at /run/acis: model.sock, egress.sock and the CA files. */
  runDir: string;
  /**
   * The runner's credential: it authenticates the runner to the egress proxy and to the model
   * gateway, which stand for it only while a run is in progress on the runner.
   */
  credential: RunnerCredential;
  /** The egress proxy's port on this host; absent: no route out. */
  egress?: { hostPort: number } | undefined;
  prewarm: boolean;
}

export interface RunnerCredential {
  id: string;
  token: string;
}

/** The header a runner's model calls carry its credential in (the agent runtime's ANTHROPIC_CUSTOM_HEADERS). */
export const RUNNER_CREDENTIAL_HEADER = 'x-acis-runner';

export function localRunnerProcess(options: LocalRunnerProcessOptions): {
  file: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
} {
  const { appRoot, compiled, dirs, runDir } = options;
  const isolated = options.isolation !== 'none';
  // Inside a sandbox the run dir is at /run/acis and the proxy is reached through a loopback bridge to
  // egress.sock; an unisolated runner (debugging) uses the host paths and the proxy's port directly.
  const runPath = isolated ? SANDBOX_RUN : runDir;
  const shared = {
    ANTHROPIC_API_KEY: MODEL_KEY_PLACEHOLDER,
    // The runtime's host part is never resolved: it talks to the model gateway on model.sock.
    ANTHROPIC_BASE_URL: 'http://model.invalid',
    ANTHROPIC_UNIX_SOCKET: `${runPath}/model.sock`,
    ANTHROPIC_CUSTOM_HEADERS: `${RUNNER_CREDENTIAL_HEADER}: ${options.credential.id}:${options.credential.token}`,
    ...(options.egress && egressEnv(options.egress.hostPort, options.credential, runPath, isolated)),
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ACIS_SESSION_STORE: '1',
    ...(options.prewarm && { ACIS_PREWARM: '1' }),
    // The sandbox is the permission boundary (the runtime refuses to skip permissions as root otherwise).
    IS_SANDBOX: '1',
  };
  if (!isolated) {
    return {
      file: process.execPath,
      args: compiled ? [path.join(appRoot, 'dist', 'runner', 'runner.js')] : ['--import', 'tsx', path.join(appRoot, 'runner', 'runner.ts')],
      cwd: dirs.workspace,
      env: {
        ...shared,
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: dirs.home,
        CLAUDE_CONFIG_DIR: path.join(dirs.home, '.claude'),
      },
    };
  }
  const source = runnerCommand(appRoot, compiled);
  const { args, env } = bwrapCommand({
    workspace: dirs.workspace,
    home: dirs.home,
    runtimeDirs: source.runtimeDirs,
    runDir,
    env: { ...shared, CLAUDE_CONFIG_DIR: `${SANDBOX_HOME}/.claude` },
    command: source.command,
  });
  return { file: options.bwrapPath, args, cwd: dirs.root, env };
}

/** The runner's route out: every HTTP(S) client through the egress proxy with the runner's credential, trusting its CA. */
function egressEnv(hostPort: number, credential: RunnerCredential, runPath: string, isolated: boolean): Record<string, string> {
  const { id, token } = credential;
  const proxy = `http://${id}:${token}@127.0.0.1:${isolated ? SANDBOX_PROXY_PORT : hostPort}`;
  const bundle = `${runPath}/ca-bundle.pem`;
  return {
    ...(isolated && { ACIS_FORWARD: `${SANDBOX_PROXY_PORT}=${runPath}/egress.sock` }),
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: '',
    no_proxy: '',
    NODE_EXTRA_CA_CERTS: `${runPath}/egress-ca.pem`,
    SSL_CERT_FILE: bundle,
    CURL_CA_BUNDLE: bundle,
    REQUESTS_CA_BUNDLE: bundle,
    GIT_SSL_CAINFO: bundle,
  };
}
