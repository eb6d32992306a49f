/** The runner's environment: stdio by default, TCP with a token when ACIS_RUNNER_LISTEN is set, every problem at once. */
import { describe, expect, it } from 'vitest';
import { agentEnvironment, DEFAULT_RECONNECT_SECONDS, readRunnerConfig } from '../../runner/runner-config.js';

const TOKEN = 'abcdefghijklmnopqrstuvwxyz';
const noFile = (file: string): string => {
  throw new Error(`ENOENT: ${file}`);
};
const CA_FILE = '/etc/acis/egress-ca/ca.crt';
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
/** The files a pod has: the CA certificate the controller mounts. */
const podFiles = (file: string): string => (file === CA_FILE ? CA_PEM : noFile(file));
const TLS = { ACIS_RUNNER_TLS_CA_FILE: CA_FILE };

describe('readRunnerConfig(env, readFile)', () => {
  it('speaks on stdio without ACIS_RUNNER_LISTEN, with its forwards', () => {
    expect(readRunnerConfig({ ACIS_FORWARD: '3128=/run/acis/egress.sock' }, noFile)).toEqual({
      config: { forwards: [{ port: 3128, socket: '/run/acis/egress.sock' }], listen: undefined, prewarm: false },
      problems: [],
    });
  });

  it('prewarms the agent runtime with ACIS_PREWARM=1, and refuses any other value than 0 or 1', () => {
    expect(readRunnerConfig({ ACIS_PREWARM: '1' }, noFile).config?.prewarm).toBe(true);
    expect(readRunnerConfig({ ACIS_PREWARM: '0' }, noFile).config?.prewarm).toBe(false);
    expect(readRunnerConfig({ ACIS_PREWARM: 'yes' }, noFile).problems).toEqual(['ACIS_PREWARM must be 0 or 1']);
  });

  it.each([
    ['0.0.0.0:7777', { host: '0.0.0.0', port: 7777 }],
    [':7777', { host: '0.0.0.0', port: 7777 }],
    ['[::]:7777', { host: '::', port: 7777 }],
    ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
  ])('listens on %s with the token and the default reconnect window', (listen, address) => {
    expect(readRunnerConfig({ ACIS_RUNNER_LISTEN: listen, ACIS_RUNNER_TOKEN: TOKEN, ...TLS }, podFiles).config?.listen).toEqual({
      ...address,
      token: TOKEN,
      clientCa: CA_PEM,
      reconnectSeconds: DEFAULT_RECONNECT_SECONDS,
    });
  });

  it('reads the token from ACIS_RUNNER_TOKEN_FILE, trimmed, and takes the reconnect window', () => {
    const config = readRunnerConfig(
      { ACIS_RUNNER_LISTEN: '0.0.0.0:7777', ACIS_RUNNER_TOKEN_FILE: '/var/run/token', ACIS_RUNNER_RECONNECT_SECONDS: '2.5', ...TLS },
      (file) => (file === '/var/run/token' ? `${TOKEN}\n` : podFiles(file)),
    ).config;
    expect(config?.listen).toMatchObject({ token: TOKEN, reconnectSeconds: 2.5 });
  });

  it('takes the drain port (the preStop hook’s), another than the control port', () => {
    const listen = (extra: Record<string, string>) =>
      readRunnerConfig({ ACIS_RUNNER_LISTEN: '0.0.0.0:7777', ACIS_RUNNER_TOKEN: TOKEN, ...TLS, ...extra }, podFiles);
    expect(listen({ ACIS_RUNNER_DRAIN_PORT: '7778' }).config?.listen?.drainPort).toBe(7778);
    expect(listen({}).config?.listen?.drainPort).toBeUndefined();
    for (const port of ['7777', '0', 'x'])
      expect(listen({ ACIS_RUNNER_DRAIN_PORT: port }).problems).toEqual([
        'ACIS_RUNNER_DRAIN_PORT must be a port (1-65535) other than the one of ACIS_RUNNER_LISTEN',
      ]);
  });

  it('reports every problem together, never quoting the token', () => {
    const { problems } = readRunnerConfig(
      { ACIS_RUNNER_LISTEN: 'nowhere', ACIS_RUNNER_TOKEN: 'short-secret', ACIS_RUNNER_RECONNECT_SECONDS: '0', ACIS_FORWARD: 'x' },
      noFile,
    );
    expect(problems).toEqual([
      'ACIS_FORWARD entry "x" is not port=/socket/path',
      'ACIS_RUNNER_LISTEN "nowhere" is not host:port',
      'ACIS_RUNNER_TOKEN (or ACIS_RUNNER_TOKEN_FILE) must hold a token of at least 16 characters',
      'ACIS_RUNNER_TLS_CA_FILE must name the deployment CA certificate (PEM): the link is served over TLS only',
      'ACIS_RUNNER_RECONNECT_SECONDS must be a positive number of seconds',
    ]);
    expect(problems.join('\n')).not.toContain('short-secret');
    expect(readRunnerConfig({ ACIS_RUNNER_LISTEN: ':1', ACIS_RUNNER_TOKEN_FILE: '/missing' }, noFile).problems[0]).toBe(
      'ACIS_RUNNER_TOKEN_FILE cannot be read: ENOENT: /missing',
    );
  });

  it('serves TLS only: a listener without a readable CA certificate is refused, with no plaintext fallback', () => {
    const listen = (ca: Record<string, string>, files = podFiles) =>
      readRunnerConfig({ ACIS_RUNNER_LISTEN: ':7777', ACIS_RUNNER_TOKEN: TOKEN, ...ca }, files).problems;
    expect(listen({})).toEqual(['ACIS_RUNNER_TLS_CA_FILE must name the deployment CA certificate (PEM): the link is served over TLS only']);
    expect(listen({ ACIS_RUNNER_TLS_CA_FILE: '/missing' })).toEqual(['ACIS_RUNNER_TLS_CA_FILE cannot be read: ENOENT: /missing']);
    expect(listen(TLS, () => 'not a certificate')).toEqual([`ACIS_RUNNER_TLS_CA_FILE ${CA_FILE} holds no PEM certificate`]);
  });

  it('refuses a token without a listener (the protocol would go unauthenticated on stdio)', () => {
    expect(readRunnerConfig({ ACIS_RUNNER_TOKEN: TOKEN }, noFile).problems).toHaveLength(1);
  });

  it("gives the agent the runner's environment without its connection token", () => {
    expect(
      agentEnvironment({
        ACIS_RUNNER_TOKEN: TOKEN,
        ACIS_RUNNER_TOKEN_FILE: '/var/run/token',
        HOME: '/workspace/.home',
        HTTPS_PROXY: 'http://p:3128',
      }),
    ).toEqual({
      HOME: '/workspace/.home',
      HTTPS_PROXY: 'http://p:3128',
    });
  });
});
