import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { ControllerConfigError, loadControllerConfig } from '../../controller/config.js';
import { withProxyAddress } from '../../controller/controller.js';

describe('withProxyAddress(config)', () => {
  const logger = pino({ level: 'silent' });

  it('resolves the proxy name once when runner pods have no DNS, and says why it cannot', async () => {
    const resolved = await withProxyAddress(loadControllerConfig({ ACIS_EGRESS_PROXY_HOST: 'localhost' }), logger);
    expect(resolved.egressProxyHost).toMatch(/^(127\.0\.0\.1|::1)$/);
    await expect(withProxyAddress(loadControllerConfig({ ACIS_EGRESS_PROXY_HOST: 'no-such-proxy.invalid' }), logger)).rejects.toThrow(
      /^ACIS_EGRESS_PROXY_HOST=no-such-proxy\.invalid does not resolve/,
    );
  });

  it('keeps the name when runner pods may query the DNS', async () => {
    const config = loadControllerConfig({ ACIS_EGRESS_PROXY_HOST: 'no-such-proxy.invalid', ACIS_SANDBOX_DNS: '1' });
    expect((await withProxyAddress(config, logger)).egressProxyHost).toBe('no-such-proxy.invalid');
  });
});

describe('loadControllerConfig(env)', () => {
  it('defaults fit a cluster installed by the chart', () => {
    const config = loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' });
    expect(config).toMatchObject({
      namespace: 'acis',
      runnerPort: 7070,
      egressProxyHost: 'acis-egress-proxy',
      egressProxyPort: 3128,
      maxSandboxes: 100,
      leaseName: 'acis-controller',
      leaseDurationMs: 15_000,
      runnerCommand: [],
      runnerResources: { requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '2', memory: '2Gi' } },
      poolRefillDelayMs: 300,
      sandboxDns: false,
    });
  });

  it('puts the sandboxes in ACIS_K8S_SANDBOX_NAMESPACE, else beside the controller (its Lease stays in ACIS_K8S_NAMESPACE)', () => {
    expect(loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' })).toMatchObject({ namespace: 'acis', sandboxNamespace: 'acis' });
    expect(loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_K8S_SANDBOX_NAMESPACE: 'acis-sandboxes' })).toMatchObject({
      namespace: 'acis',
      sandboxNamespace: 'acis-sandboxes',
    });
    expect(() => loadControllerConfig({ ACIS_K8S_SANDBOX_NAMESPACE: 'Sandboxes' })).toThrow(/ACIS_K8S_SANDBOX_NAMESPACE/);
  });

  it('takes the pool refill delay in seconds, 0 to refill at once', () => {
    expect(loadControllerConfig({ ACIS_POOL_REFILL_DELAY_SECONDS: '1.5' }).poolRefillDelayMs).toBe(1500);
    expect(loadControllerConfig({ ACIS_POOL_REFILL_DELAY_SECONDS: '0' }).poolRefillDelayMs).toBe(0);
    expect(() => loadControllerConfig({ ACIS_POOL_REFILL_DELAY_SECONDS: '-1' })).toThrow(/ACIS_POOL_REFILL_DELAY_SECONDS/);
  });

  it('takes the image pull Secrets comma-separated, none by default', () => {
    expect(loadControllerConfig({}).imagePullSecrets).toEqual([]);
    expect(loadControllerConfig({ ACIS_IMAGE_PULL_SECRETS: 'registry-a, registry-b' }).imagePullSecrets).toEqual([
      'registry-a',
      'registry-b',
    ]);
    expect(() => loadControllerConfig({ ACIS_IMAGE_PULL_SECRETS: 'Not A Name' })).toThrow(/ACIS_IMAGE_PULL_SECRETS/);
  });

  it('refuses default runner requests above their limits, which every runner pod would be refused for', () => {
    expect(() => loadControllerConfig({ ACIS_RUNNER_CPU_REQUEST: '4', ACIS_RUNNER_CPU_LIMIT: '2' })).toThrow(
      /cpu request 4 exceeds its limit 2/,
    );
    expect(loadControllerConfig({ ACIS_RUNNER_CPU_REQUEST: '2', ACIS_RUNNER_CPU_LIMIT: '2000m' }).runnerResources.requests!.cpu).toBe('2');
  });

  it('reports every problem of the environment at once', () => {
    let error: unknown;
    try {
      loadControllerConfig({ ACIS_K8S_NAMESPACE: 'Not_A_Namespace', ACIS_RUNNER_MEMORY_LIMIT: 'lots', ACIS_CLUSTER_MAX_SANDBOXES: '0' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ControllerConfigError);
    const message = (error as Error).message;
    expect(message).toContain('ACIS_K8S_NAMESPACE');
    expect(message).toContain('ACIS_RUNNER_MEMORY_LIMIT: must be a Kubernetes quantity');
    expect(message).toContain('ACIS_CLUSTER_MAX_SANDBOXES');
  });

  it('splits the runner command on spaces', () => {
    expect(loadControllerConfig({ ACIS_RUNNER_COMMAND: 'node  dist/runner/runner.js' }).runnerCommand).toEqual([
      'node',
      'dist/runner/runner.js',
    ]);
  });
});
