import { describe, expect, it } from 'vitest';
import { ControllerConfigError, loadControllerConfig } from '../../controller/config.js';

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
    });
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
    expect(loadControllerConfig({ ACIS_RUNNER_COMMAND: 'node  dist/sandbox/runner.js' }).runnerCommand).toEqual(['node', 'dist/sandbox/runner.js']);
  });
});
