import { describe, expect, it } from 'vitest';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { API_VERSION, type Sandbox, type SandboxWarmPool } from '../../controller/api/v1alpha1.js';
import { loadControllerConfig } from '../../controller/config.js';
import { runnerPod } from '../../controller/pod-template.js';
import { resourcesProblem } from '../../controller/runner-resources.js';

const sandbox: Sandbox = {
  apiVersion: API_VERSION,
  kind: 'Sandbox',
  metadata: { name: 'con-01jab', namespace: 'acis', uid: 'uid-1' },
  spec: { conversationId: 'con_01JAB', tenantId: 'ten_1', agentType: 'vendor-agent-sdk', mode: 'pooled' },
};

const container = (pod: V1Pod): V1Container => pod.spec!.containers[0]!;
const envOf = (pod: V1Pod) =>
  Object.fromEntries((container(pod).env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));

describe('runnerPod: sandbox DNS', () => {
  it('is off by default: the resolver points at the pod itself and the proxy is given as configured (an address)', () => {
    const pod = runnerPod(
      sandbox,
      'con-01jab-x1',
      loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_EGRESS_PROXY_HOST: '10.96.0.40' }),
    );
    expect(pod.spec).toMatchObject({ dnsPolicy: 'None', dnsConfig: { nameservers: ['127.0.0.1'], searches: [] } });
    expect(envOf(pod).HTTPS_PROXY).toBe('http://$(POD_NAME):$(ACIS_EGRESS_TOKEN)@10.96.0.40:3128');
  });

  it('ACIS_SANDBOX_DNS=1 leaves the cluster DNS to the pod', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_SANDBOX_DNS: '1' }));
    expect(pod.spec!.dnsPolicy).toBeUndefined();
    expect(pod.spec!.dnsConfig).toBeUndefined();
    expect(envOf(pod).HTTPS_PROXY).toBe('http://$(POD_NAME):$(ACIS_EGRESS_TOKEN)@acis-egress-proxy:3128');
  });
});

describe('runnerPod: the model path and trust of the egress proxy', () => {
  it('gives the pod the model endpoint and only the placeholder of the platform key', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' }));
    expect(envOf(pod)).toMatchObject({
      ANTHROPIC_BASE_URL: 'https://api.anthropic.com',
      ANTHROPIC_API_KEY: '{{secret:ANTHROPIC_API_KEY}}',
    });
    const custom = runnerPod(
      sandbox,
      'con-01jab-x1',
      loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_MODEL_BASE_URL: 'http://models.internal:8080/' }),
    );
    expect(envOf(custom).ANTHROPIC_BASE_URL).toBe('http://models.internal:8080');
  });

  it('mounts the proxy CA from the named ConfigMap read-only and points every client at it', () => {
    const pod = runnerPod(
      sandbox,
      'con-01jab-x1',
      loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_EGRESS_CA_CONFIGMAP: 'acis-egress-ca' }),
    );
    expect(pod.spec!.volumes).toContainEqual({
      name: 'egress-ca',
      configMap: { name: 'acis-egress-ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] },
    });
    expect(container(pod).volumeMounts).toContainEqual({ name: 'egress-ca', mountPath: '/etc/acis/egress-ca', readOnly: true });
    expect(envOf(pod)).toMatchObject({
      // The CA the API server's certificate must chain to for the runner link.
      ACIS_RUNNER_TLS_CA_FILE: '/etc/acis/egress-ca/ca.crt',
      ACIS_EGRESS_CA_FILE: '/etc/acis/egress-ca/ca.crt',
      NODE_EXTRA_CA_CERTS: '/etc/acis/egress-ca/ca.crt',
      SSL_CERT_FILE: '/tmp/acis-ca-bundle.pem',
      CURL_CA_BUNDLE: '/tmp/acis-ca-bundle.pem',
      GIT_SSL_CAINFO: '/tmp/acis-ca-bundle.pem',
      REQUESTS_CA_BUNDLE: '/tmp/acis-ca-bundle.pem',
    });
    expect(container(pod).securityContext?.readOnlyRootFilesystem).toBe(true);
  });

  it('without a CA ConfigMap mounts nothing and sets no trust variables', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' }));
    expect(pod.spec!.volumes!.map((v) => v.name)).toEqual(['workspace', 'tmp']);
    expect(Object.keys(envOf(pod))).not.toContain('NODE_EXTRA_CA_CERTS');
    expect(Object.keys(envOf(pod))).not.toContain('SSL_CERT_FILE');
  });

  it('refuses a model endpoint that is not an http(s) URL', () => {
    expect(() => loadControllerConfig({ ACIS_MODEL_BASE_URL: 'ftp://models' })).toThrow(/ACIS_MODEL_BASE_URL/);
  });

  it('prewarms the agent runtime in warm-pool pods only, unless ACIS_POOL_PREWARM=0', () => {
    const pool = {
      apiVersion: API_VERSION,
      kind: 'SandboxWarmPool',
      metadata: { name: 'pool', namespace: 'acis', uid: 'uid-2' },
      spec: { agentType: 'vendor-agent-sdk', replicas: 1 },
    } as SandboxWarmPool;
    const config = loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' });
    expect(envOf(runnerPod(pool, 'pool-x1', config)).ACIS_PREWARM).toBe('1');
    expect(envOf(runnerPod(sandbox, 'con-01jab-x1', config)).ACIS_PREWARM).toBeUndefined();
    expect(
      envOf(runnerPod(pool, 'pool-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_POOL_PREWARM: '0' }))).ACIS_PREWARM,
    ).toBeUndefined();
  });
});

describe('runnerPod: private registries', () => {
  const pool = {
    apiVersion: API_VERSION,
    kind: 'SandboxWarmPool',
    metadata: { name: 'pool', namespace: 'acis', uid: 'uid-2' },
    spec: { agentType: 'vendor-agent-sdk', replicas: 1 },
  } as SandboxWarmPool;

  it('gives Sandbox and warm-pool pods the image pull Secrets of ACIS_IMAGE_PULL_SECRETS', () => {
    const config = loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_IMAGE_PULL_SECRETS: 'registry-a,registry-b' });
    const expected = [{ name: 'registry-a' }, { name: 'registry-b' }];
    expect(runnerPod(sandbox, 'con-01jab-x1', config).spec!.imagePullSecrets).toEqual(expected);
    expect(runnerPod(pool, 'pool-x1', config).spec!.imagePullSecrets).toEqual(expected);
  });

  it('without any, sets none', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' }));
    expect(pod.spec!.imagePullSecrets).toBeUndefined();
  });
});

describe('runnerPod: what a runner may write', () => {
  it('bounds ephemeral storage by default (1Gi requested, 4Gi limit) and caps the workspace volume at the limit', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis' }));
    expect(container(pod).resources).toMatchObject({
      requests: { 'ephemeral-storage': '1Gi' },
      limits: { 'ephemeral-storage': '4Gi' },
    });
    expect(pod.spec!.volumes).toContainEqual({ name: 'workspace', emptyDir: { sizeLimit: '4Gi' } });
  });

  it("takes the deployment's setting, and a Sandbox's own limit over it", () => {
    const config = loadControllerConfig({
      ACIS_K8S_NAMESPACE: 'acis',
      ACIS_RUNNER_EPHEMERAL_STORAGE_REQUEST: '500Mi',
      ACIS_RUNNER_EPHEMERAL_STORAGE_LIMIT: '2Gi',
    });
    const pod = runnerPod(sandbox, 'con-01jab-x1', config);
    expect(container(pod).resources?.limits).toMatchObject({ 'ephemeral-storage': '2Gi' });
    expect(pod.spec!.volumes).toContainEqual({ name: 'workspace', emptyDir: { sizeLimit: '2Gi' } });
    const own = runnerPod(
      { ...sandbox, spec: { ...sandbox.spec, resources: { limits: { 'ephemeral-storage': '8Gi' } } } },
      'con-01jab-x2',
      config,
    );
    expect(own.spec!.volumes).toContainEqual({ name: 'workspace', emptyDir: { sizeLimit: '8Gi' } });
    expect(() =>
      loadControllerConfig({ ACIS_RUNNER_EPHEMERAL_STORAGE_REQUEST: '8Gi', ACIS_RUNNER_EPHEMERAL_STORAGE_LIMIT: '2Gi' }),
    ).toThrow(/ephemeral-storage request 8Gi exceeds its limit 2Gi/);
  });
});

describe('resourcesProblem: requests above limits, as the API server refuses them', () => {
  const defaults = { requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '2', memory: '2Gi' } };

  it('names a request raised above the default limit', () => {
    expect(resourcesProblem(defaults, { requests: { cpu: '16' } })).toContain('the cpu request 16 exceeds its limit 2 (the default)');
    expect(resourcesProblem(defaults, { requests: { memory: '3Gi' }, limits: { memory: '2048Mi' } })).toContain(
      'the memory request 3Gi exceeds its limit 2048Mi',
    );
  });

  it('accepts requests within their limits, equal ones, and none', () => {
    expect(resourcesProblem(defaults, undefined)).toBeUndefined();
    expect(resourcesProblem(defaults, { requests: { cpu: '16' }, limits: { cpu: '16' } })).toBeUndefined();
    expect(resourcesProblem(defaults, { requests: { cpu: '1500m', memory: '2Gi' } })).toBeUndefined();
  });
});

describe('runnerPod: a graceful stop', () => {
  it('waits in a preStop hook on the runner’s drain port (the control port + 1 unless ACIS_RUNNER_DRAIN_PORT), within a grace period', () => {
    const pod = runnerPod(sandbox, 'con-01jab-x1', loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_RUNNER_PORT: '7070' }));
    expect(container(pod).lifecycle).toEqual({ preStop: { httpGet: { path: '/drain', port: 'drain' } } });
    expect(container(pod).ports).toContainEqual({ name: 'drain', containerPort: 7071, protocol: 'TCP' });
    expect(envOf(pod).ACIS_RUNNER_DRAIN_PORT).toBe('7071');
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(30);
    const chosen = loadControllerConfig({ ACIS_K8S_NAMESPACE: 'acis', ACIS_RUNNER_DRAIN_PORT: '9000' });
    expect(envOf(runnerPod(sandbox, 'con-01jab-x1', chosen)).ACIS_RUNNER_DRAIN_PORT).toBe('9000');
    expect(() => loadControllerConfig({ ACIS_RUNNER_PORT: '7070', ACIS_RUNNER_DRAIN_PORT: '7070' })).toThrow(/ACIS_RUNNER_DRAIN_PORT/);
  });
});
