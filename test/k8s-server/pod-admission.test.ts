/**
 * Pod validation and admission as kube-apiserver 1.35 answers them: the status code, reason and
 * message shape of each refusal (pkg/apis/core/validation, the LimitRanger plugin, Pod Security
 * admission), and `Warning` headers for the warn mode, over HTTP and through real kubectl.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

let server: KubeTestServer;

beforeAll(async () => {
  server = await startKubeTestServer({ namespaces: ['limited', 'enforced', 'warned'], podAdmission: { requestsWithinLimits: true } });
  server.store.patch(
    'namespaces',
    undefined,
    'enforced',
    'application/merge-patch+json',
    JSON.stringify({ metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } }),
  );
  server.store.patch(
    'namespaces',
    undefined,
    'warned',
    'application/merge-patch+json',
    JSON.stringify({
      metadata: { labels: { 'pod-security.kubernetes.io/warn': 'restricted', 'pod-security.kubernetes.io/enforce': 'baseline' } },
    }),
  );
});
afterAll(() => server.close());

interface Answer {
  code: number;
  warnings: string[];
  body: {
    kind?: string;
    reason?: string;
    message?: string;
    code?: number;
    metadata?: { annotations?: Record<string, string> };
    spec?: { containers: Array<{ resources?: unknown }> };
  };
}

async function createPod(namespace: string, name: string, spec: Record<string, unknown>): Promise<Answer> {
  const response = await fetch(`${server.url}/api/v1/namespaces/${namespace}/pods`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec }),
  });
  const warnings = response.headers.get('warning');
  return { code: response.status, warnings: warnings ? warnings.split(/, (?=299 )/) : [], body: (await response.json()) as Answer['body'] };
}

const container = (extra: Record<string, unknown> = {}) => ({ name: 'main', image: 'example/app:1', ...extra });

/** A container the restricted profile admits. */
const RESTRICTED = {
  securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
  containers: [container({ securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } })],
};

describe('pod validation (ValidatePodCreate)', () => {
  it('refuses port names that are not IANA_SVC_NAMEs, one cause per rule broken', async () => {
    const answer = await createPod('default', 'ports', {
      containers: [
        container({
          ports: [
            { name: 'metrics-port-long', containerPort: 9090 },
            { name: 'Web--', containerPort: 8080 },
            { name: '8080', containerPort: 8081 },
          ],
        }),
      ],
    });
    expect(answer.code).toBe(422);
    expect(answer.body).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422 });
    expect(answer.body.message).toBe(
      'Pod "ports" is invalid: [' +
        'spec.containers[0].ports[0].name: Invalid value: "metrics-port-long": must be no more than 15 characters, ' +
        'spec.containers[0].ports[1].name: Invalid value: "Web--": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), ' +
        'spec.containers[0].ports[1].name: Invalid value: "Web--": must not contain consecutive hyphens, ' +
        'spec.containers[0].ports[1].name: Invalid value: "Web--": must not begin or end with a hyphen, ' +
        'spec.containers[0].ports[2].name: Invalid value: "8080": must contain at least one letter (a-z)]',
    );
  });

  it('refuses a request above its limit and a mount of an undeclared volume', async () => {
    const answer = await createPod('default', 'resources', {
      volumes: [{ name: 'scratch', emptyDir: {} }],
      containers: [
        container({
          resources: { requests: { cpu: '200m' }, limits: { cpu: '100m' } },
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        }),
      ],
    });
    expect(answer.code).toBe(422);
    expect(answer.body.message).toBe(
      'Pod "resources" is invalid: [spec.containers[0].volumeMounts[0].name: Not found: "data", ' +
        'spec.containers[0].resources.requests: Invalid value: "200m": must be less than or equal to cpu limit of 100m]',
    );
  });

  it("keeps a pod's spec but its images, activeDeadlineSeconds and added tolerations", async () => {
    expect(
      (await createPod('default', 'immutable', { containers: [container()], tolerations: [{ key: 'a', operator: 'Exists' }] })).code,
    ).toBe(201);
    const update = (change: (spec: Record<string, any>) => void) => {
      const next = structuredClone(server.store.get('pods', 'default', 'immutable') as KubeObject & { spec: Record<string, any> });
      change(next.spec);
      return fetch(`${server.url}/api/v1/namespaces/default/pods/immutable`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(next),
      });
    };
    const added = await update((spec) => {
      spec.containers[0].image = 'example/app:2';
      spec.tolerations.push({ key: 'b', operator: 'Exists' });
    });
    expect(added.status).toBe(200);
    const removed = await update((spec) => (spec.tolerations = []));
    expect(removed.status).toBe(422);
    expect(((await removed.json()) as { message: string }).message).toMatch(
      /^Pod "immutable" is invalid: spec: Forbidden: pod updates may not change fields other than `spec\.containers\[\*\]\.image`/,
    );
  });
});

describe('LimitRange admission', () => {
  beforeAll(() => {
    server.store.create('limitranges', 'limited', {
      metadata: { name: 'container-limits' },
      spec: {
        limits: [
          {
            type: 'Container',
            default: { cpu: '500m', memory: '256Mi' },
            defaultRequest: { cpu: '100m' },
            max: { cpu: '1' },
            min: { memory: '32Mi' },
          },
        ],
      },
    });
  });

  it('fills in default requests and limits and says so in the limit-ranger annotation', async () => {
    const answer = await createPod('limited', 'defaulted', { containers: [container({ resources: { requests: { memory: '64Mi' } } })] });
    expect(answer.code).toBe(201);
    expect(answer.body.spec!.containers[0]!.resources).toEqual({
      requests: { cpu: '100m', memory: '64Mi' },
      limits: { cpu: '500m', memory: '256Mi' },
    });
    expect(answer.body.metadata!.annotations!['kubernetes.io/limit-ranger']).toBe(
      'LimitRanger plugin set: cpu request for container main; cpu, memory limit for container main',
    );
  });

  it('refuses a limit over max and a request under min with 403 Forbidden', async () => {
    const answer = await createPod('limited', 'too-big', {
      containers: [container({ resources: { requests: { memory: '16Mi' }, limits: { cpu: '2', memory: '64Mi' } } })],
    });
    expect(answer.code).toBe(403);
    expect(answer.body).toMatchObject({ reason: 'Forbidden', code: 403 });
    expect(answer.body.message).toBe(
      'pods "too-big" is forbidden: [minimum memory usage per Container is 32Mi, but request is 16Mi, maximum cpu usage per Container is 1, but limit is 2]',
    );
  });
});

describe('Pod Security admission', () => {
  it('enforce: refuses a pod the restricted profile forbids, every violated check named', async () => {
    const answer = await createPod('enforced', 'loose', { containers: [container()] });
    expect(answer.code).toBe(403);
    expect(answer.body).toMatchObject({ reason: 'Forbidden', code: 403 });
    expect(answer.body.message).toBe(
      'pods "loose" is forbidden: violates PodSecurity "restricted:latest": ' +
        'allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"]), ' +
        'runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
    expect((await createPod('enforced', 'tight', RESTRICTED)).code).toBe(201);
  });

  it('enforce baseline: refuses privileged containers, host namespaces, hostPath volumes and hostPorts', async () => {
    const answer = await createPod('warned', 'privileged', {
      hostNetwork: true,
      volumes: [{ name: 'root', hostPath: { path: '/' } }],
      containers: [
        container({
          securityContext: { privileged: true },
          ports: [{ containerPort: 80, hostPort: 80 }],
          volumeMounts: [{ name: 'root', mountPath: '/host' }],
        }),
      ],
    });
    expect(answer.code).toBe(403);
    expect(answer.body.message).toBe(
      'pods "privileged" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), hostPath volumes (volume "root"), hostPort (container "main" uses hostPort 80), privileged (container "main" must not set securityContext.privileged=true)',
    );
  });

  it('warn: admits the pod with a 299 Warning header, which kubectl prints', async () => {
    const answer = await createPod('warned', 'unconfined', {
      containers: [
        container({ securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true } }),
      ],
    });
    expect(answer.code).toBe(201);
    expect(answer.warnings).toEqual([
      '299 - "would violate PodSecurity \\"restricted:latest\\": seccompProfile (pod or container \\"main\\" must set securityContext.seccompProfile.type to \\"RuntimeDefault\\" or \\"Localhost\\")"',
    ]);
    const manifest = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'by-kubectl', namespace: 'warned' },
      spec: { containers: [container()] },
    });
    const created = await kubectl(['create', '-f', '-'], { kubeconfig: server.kubeconfigPath, input: manifest });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain(
      'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false)',
    );
  });
});

describe('startKubeTestServer({ podAdmission })', () => {
  it('relaxes the rules a test turns off', async () => {
    const relaxed = await startKubeTestServer({ podAdmission: { validation: false, podSecurity: false } });
    try {
      relaxed.store.patch(
        'namespaces',
        undefined,
        'default',
        'application/merge-patch+json',
        JSON.stringify({ metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } }),
      );
      const pod = relaxed.store.create('pods', 'default', {
        metadata: { name: 'relaxed' },
        spec: { containers: [container({ ports: [{ name: 'Not_A_Port_Name', containerPort: 80 }] })] },
      });
      expect(pod.metadata.uid).toBeDefined();
    } finally {
      await relaxed.close();
    }
  });
});
