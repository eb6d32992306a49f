/**
 * kubectl 1.35's own requests: the commands that send protobuf bodies (create namespace, create
 * serviceaccount, create token, auth can-i, auth whoami), and LimitRange served for `kubectl create -f`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, type ToolResult } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

let server: KubeTestServer;

beforeAll(async () => {
  server = await startKubeTestServer();
});
afterAll(() => server.close());

function run(args: string[], input?: string): Promise<ToolResult> {
  return kubectl(args, { kubeconfig: server.kubeconfigPath, input });
}

const LIMIT_RANGE = `apiVersion: v1
kind: LimitRange
metadata:
  name: defaults
spec:
  limits:
    - type: Container
      default: { cpu: 500m, memory: 256Mi }
      defaultRequest: { cpu: 100m, memory: 64Mi }
      max: { cpu: "2" }
`;

describe('kubectl requests sent as protobuf', () => {
  it('creates a namespace from its protobuf body', async () => {
    expect(await run(['create', 'namespace', 'team-a'])).toMatchObject({ code: 0, stdout: 'namespace/team-a created\n' });
    expect(server.store.get('namespaces', undefined, 'team-a').metadata.name).toBe('team-a');
    expect(server.requests.some((request) => request.resource === 'namespaces' && request.verb === 'create')).toBe(true);
  });

  it('creates a service account and a token for it, 404 for an account that does not exist', async () => {
    expect(await run(['create', 'serviceaccount', 'builder', '-n', 'team-a'])).toMatchObject({ code: 0 });
    const token = await run(['create', 'token', 'builder', '-n', 'team-a', '--duration', '20m', '--audience', 'acis']);
    expect(token.code, token.stderr).toBe(0);
    const claims = JSON.parse(Buffer.from(token.stdout.trim().split('.')[1]!, 'base64url').toString()) as {
      sub: string;
      aud: string[];
      exp: number;
      iat: number;
    };
    expect(claims).toMatchObject({ sub: 'system:serviceaccount:team-a:builder', aud: ['acis'] });
    expect(claims.exp - claims.iat).toBe(1200);
    const missing = await run(['create', 'token', 'nobody', '-n', 'team-a']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('serviceaccounts "nobody" not found');
    const short = await run(['create', 'token', 'builder', '-n', 'team-a', '--duration', '5m']);
    expect(short.stderr).toContain('spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes');
  });

  it('answers auth can-i, can-i --list and whoami as for a client allowed everything', async () => {
    expect(await run(['auth', 'can-i', 'create', 'pods', '-n', 'team-a'])).toMatchObject({ code: 0, stdout: 'yes\n' });
    const list = await run(['auth', 'can-i', '--list', '-n', 'team-a']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$/m);
    const whoami = await run(['auth', 'whoami']);
    expect(whoami.code, whoami.stderr).toBe(0);
    expect(whoami.stdout).toMatch(/Username\s+acis-test/);
  });
});

describe('LimitRange', () => {
  it('is served: kubectl create -f validates it on the server, get lists it by its short name', async () => {
    expect(await run(['create', '-f', '-', '-n', 'team-a'], LIMIT_RANGE)).toMatchObject({
      code: 0,
      stdout: 'limitrange/defaults created\n',
    });
    expect(server.requests.some((request) => request.resource === 'limitranges' && request.query.includes('fieldValidation=Strict'))).toBe(
      true,
    );
    const listed = await run(['get', 'limits', '-n', 'team-a']);
    expect(listed.stdout).toMatch(/^defaults\s/m);
    const resources = await run(['api-resources', '--api-group=']);
    expect(resources.stdout).toMatch(/^limitranges\s+limits\s+v1\s+true\s+LimitRange$/m);
  });
});
