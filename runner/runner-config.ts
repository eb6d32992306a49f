/**
 * The runner's environment, read once at start; every problem is reported together. Without
 * ACIS_RUNNER_LISTEN the runner speaks its protocol on stdio (the local provider starts it); with
 * it, it serves the protocol over TLS (in a pod) to a client with a certificate of the deployment's CA
 * (ACIS_RUNNER_TLS_CA_FILE), authenticated by proofs of the per-sandbox token.
 */
export interface ListenConfig {
  host: string;
  port: number;
  token: string;
  /** ACIS_RUNNER_TLS_CA_FILE's certificate (PEM): the CA the API server's client certificate must chain to. */
  clientCa: string;
  reconnectSeconds: number;
  /** ACIS_RUNNER_DRAIN_PORT: where a pod's preStop hook waits for the API server to be done (drain-server.ts). */
  drainPort: number | undefined;
}

export interface RunnerConfig {
  /** Loopback listeners bridged to bound sockets (ACIS_FORWARD `port=/socket,...`). */
  forwards: Array<{ port: number; socket: string }>;
  listen: ListenConfig | undefined;
  /** ACIS_PREWARM=1: start the agent runtime's process now, for the first turn to claim (pool runners). */
  prewarm: boolean;
}

export const DEFAULT_RECONNECT_SECONDS = 30;
/** A token shorter than this is a configuration mistake, not a secret. */
const MIN_TOKEN_LENGTH = 16;

export function readRunnerConfig(
  env: Record<string, string | undefined>,
  readFile: (path: string) => string,
): { config: RunnerConfig; problems: [] } | { config?: undefined; problems: string[] } {
  const problems: string[] = [];
  const forwards: RunnerConfig['forwards'] = [];
  for (const entry of (env.ACIS_FORWARD ?? '').split(',').filter(Boolean)) {
    const [port, socket] = entry.split('=');
    if (!port || !socket || !isPort(Number(port))) problems.push(`ACIS_FORWARD entry "${entry}" is not port=/socket/path`);
    else forwards.push({ port: Number(port), socket });
  }
  let listen: ListenConfig | undefined;
  if (env.ACIS_RUNNER_LISTEN) {
    const address = parseHostPort(env.ACIS_RUNNER_LISTEN);
    if (!address) problems.push(`ACIS_RUNNER_LISTEN "${env.ACIS_RUNNER_LISTEN}" is not host:port`);
    let token = env.ACIS_RUNNER_TOKEN ?? '';
    if (!token && env.ACIS_RUNNER_TOKEN_FILE) {
      try {
        token = readFile(env.ACIS_RUNNER_TOKEN_FILE).trim();
      } catch (error) {
        problems.push(`ACIS_RUNNER_TOKEN_FILE cannot be read: ${(error as Error).message}`);
      }
    }
    if (token.length < MIN_TOKEN_LENGTH)
      problems.push(`ACIS_RUNNER_TOKEN (or ACIS_RUNNER_TOKEN_FILE) must hold a token of at least ${MIN_TOKEN_LENGTH} characters`);
    const clientCa = readCaFile(env.ACIS_RUNNER_TLS_CA_FILE, readFile, problems);
    const reconnect =
      env.ACIS_RUNNER_RECONNECT_SECONDS === undefined ? DEFAULT_RECONNECT_SECONDS : Number(env.ACIS_RUNNER_RECONNECT_SECONDS);
    if (!(reconnect > 0) || !Number.isFinite(reconnect))
      problems.push('ACIS_RUNNER_RECONNECT_SECONDS must be a positive number of seconds');
    const drainPort = env.ACIS_RUNNER_DRAIN_PORT === undefined ? undefined : Number(env.ACIS_RUNNER_DRAIN_PORT);
    if (drainPort !== undefined && (!isPort(drainPort) || drainPort === 0 || drainPort === address?.port))
      problems.push('ACIS_RUNNER_DRAIN_PORT must be a port (1-65535) other than the one of ACIS_RUNNER_LISTEN');
    if (address) listen = { ...address, token, clientCa, reconnectSeconds: reconnect, drainPort };
  } else if (env.ACIS_RUNNER_TOKEN || env.ACIS_RUNNER_TOKEN_FILE) {
    problems.push('ACIS_RUNNER_TOKEN is set but ACIS_RUNNER_LISTEN is not: the runner would speak on stdio without authentication');
  }
  if (env.ACIS_PREWARM !== undefined && env.ACIS_PREWARM !== '0' && env.ACIS_PREWARM !== '1') problems.push('ACIS_PREWARM must be 0 or 1');
  if (problems.length > 0) return { problems };
  return { config: { forwards, listen, prewarm: env.ACIS_PREWARM === '1' }, problems: [] };
}

/** The CA certificate the link requires of its client: there is no plaintext link, so no file is a problem. */
function readCaFile(file: string | undefined, readFile: (path: string) => string, problems: string[]): string {
  if (!file) {
    problems.push('ACIS_RUNNER_TLS_CA_FILE must name the deployment CA certificate (PEM): the link is served over TLS only');
    return '';
  }
  try {
    const pem = readFile(file);
    if (pem.includes('-----BEGIN CERTIFICATE-----')) return pem;
    problems.push(`ACIS_RUNNER_TLS_CA_FILE ${file} holds no PEM certificate`);
  } catch (error) {
    problems.push(`ACIS_RUNNER_TLS_CA_FILE cannot be read: ${(error as Error).message}`);
  }
  return '';
}

/** `host:port`, `[v6]:port` or `:port` (all interfaces). */
function parseHostPort(value: string): { host: string; port: number } | undefined {
  const colon = value.lastIndexOf(':');
  if (colon === -1) return undefined;
  const port = Number(value.slice(colon + 1));
  const host = value.slice(0, colon).replace(/^\[(.*)\]$/, '$1') || '0.0.0.0';
  return isPort(port) && value.slice(colon + 1) !== '' ? { host, port } : undefined;
}

function isPort(port: number): boolean {
  return Number.isInteger(port) && port >= 0 && port <= 65535;
}

/**
 * The environment the agent runtime (and every tool it runs) sees: the runner's own, minus what
 * authenticates the API server's connection, which the agent has no business holding.
 */
export function agentEnvironment(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const { ACIS_RUNNER_TOKEN: _token, ACIS_RUNNER_TOKEN_FILE: _tokenFile, ...rest } = env;
  return rest;
}
