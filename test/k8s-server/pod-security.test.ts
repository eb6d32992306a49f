/**
 * Pod Security admission's AppArmor, SELinux, procMount and sysctls checks, and its warnings on
 * workload resources' pod templates, as kube-apiserver 1.35 answers them (staging/src/k8s.io/
 * pod-security-admission/policy/check_*.go for the wording; "Workload resources and Pod templates":
 * warnings, never a refusal).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

let server: KubeTestServer;

const label = (namespace: string, labels: Record<string, string>) =>
  server.store.patch('namespaces', undefined, namespace, 'application/merge-patch+json', JSON.stringify({ metadata: { labels } }));

beforeAll(async () => {
  server = await startKubeTestServer({ namespaces: ['baseline', 'enforced', 'warned'] });
  label('baseline', { 'pod-security.kubernetes.io/enforce': 'baseline' });
  label('enforced', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  label('warned', { 'pod-security.kubernetes.io/warn': 'baseline' });
});
afterAll(() => server.close());

async function create(path: string, body: Record<string, unknown>): Promise<{ code: number; warnings: string | null; body: any }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { code: response.status, warnings: response.headers.get('warning'), body: await response.json() };
}

const pod = (name: string, spec: Record<string, unknown>, annotations?: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, annotations },
  spec,
});

describe('baseline: AppArmor, SELinux, procMount, sysctls', () => {
  it('refuses each forbidden setting, named as the checks name them, in the order of their ids', async () => {
    const answer = await create(
      '/api/v1/namespaces/baseline/pods',
      pod('loose', {
        securityContext: {
          seLinuxOptions: { role: 'system_r' },
          sysctls: [
            { name: 'kernel.msgmax', value: '1' },
            { name: 'net.ipv4.tcp_syncookies', value: '1' },
          ],
        },
        containers: [
          {
            name: 'main',
            image: 'example/app:1',
            securityContext: {
              appArmorProfile: { type: 'Unconfined' },
              procMount: 'Unmasked',
              seLinuxOptions: { type: 'spc_t', user: 'root' },
            },
          },
        ],
      }),
    );
    expect(answer).toMatchObject({
      code: 403,
      body: {
        reason: 'Forbidden',
        message:
          'pods "loose" is forbidden: violates PodSecurity "baseline:latest": forbidden AppArmor profile (container "main" must not set appArmorProfile.type to "Unconfined"), procMount (container "main" must not set securityContext.procMount to "Unmasked"), seLinuxOptions (pod and container "main" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set), forbidden sysctls (kernel.msgmax)',
      },
    });
    expect(server.store.find('pods', 'baseline', 'loose')).toBeUndefined();
  });

  it('refuses the deprecated AppArmor annotation unless runtime/default or localhost/', async () => {
    const answer = await create(
      '/api/v1/namespaces/baseline/pods',
      pod(
        'annotated',
        { containers: [{ name: 'main', image: 'example/app:1' }] },
        {
          'container.apparmor.security.beta.kubernetes.io/main': 'unconfined',
        },
      ),
    );
    expect(answer.body.message).toBe(
      'pods "annotated" is forbidden: violates PodSecurity "baseline:latest": forbidden AppArmor profile (annotation must not set appArmorProfile.type to "container.apparmor.security.beta.kubernetes.io/main=\\"unconfined\\"")',
    );
  });

  it('admits the allowed values', async () => {
    const answer = await create(
      '/api/v1/namespaces/baseline/pods',
      pod(
        'tidy',
        {
          securityContext: {
            seLinuxOptions: { type: 'container_t', level: 's0:c1,c2' },
            sysctls: [{ name: 'net.ipv4.tcp_syncookies', value: '1' }],
          },
          containers: [
            {
              name: 'main',
              image: 'example/app:1',
              securityContext: { appArmorProfile: { type: 'RuntimeDefault' }, procMount: 'Default' },
            },
          ],
        },
        { 'container.apparmor.security.beta.kubernetes.io/main': 'localhost/custom' },
      ),
    );
    expect(answer.code, JSON.stringify(answer.body)).toBe(201);
    expect(answer.warnings).toBeNull();
  });
});

describe('workload resources', () => {
  const privilegedTemplate = {
    metadata: { labels: { app: 'web' } },
    spec: { containers: [{ name: 'main', image: 'example/app:1', securityContext: { privileged: true } }] },
  };

  it('warns of a Deployment whose pods the namespace would refuse, and stores it', async () => {
    const answer = await create('/apis/apps/v1/namespaces/enforced/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { selector: { matchLabels: { app: 'web' } }, template: privilegedTemplate },
    });
    expect(answer.code).toBe(201);
    expect(answer.warnings).toMatch(
      /^299 - "would violate PodSecurity \\"restricted:latest\\": allowPrivilegeEscalation != false \(container \\"main\\" must set/,
    );
    expect(answer.warnings).toContain('privileged (container \\"main\\" must not set securityContext.privileged=true)');
    expect(server.store.find('deployments.apps', 'enforced', 'web')).toBeDefined();
  });

  it("warns of a Job's template at the warn label's level through kubectl, and not of a compliant one", async () => {
    const job = (name: string, privileged: boolean) =>
      JSON.stringify({
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name },
        spec: {
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [{ name: 'main', image: 'example/app:1', securityContext: { privileged } }],
            },
          },
        },
      });
    const created = await kubectl(['create', '-n', 'warned', '-f', '-'], {
      kubeconfig: server.kubeconfigPath,
      input: job('loose-job', true),
    });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain(
      'Warning: would violate PodSecurity "baseline:latest": privileged (container "main" must not set securityContext.privileged=true)',
    );
    const tidy = await kubectl(['create', '-n', 'warned', '-f', '-'], { kubeconfig: server.kubeconfigPath, input: job('tidy-job', false) });
    expect(tidy).toMatchObject({ code: 0, stderr: '' });
  });
});
