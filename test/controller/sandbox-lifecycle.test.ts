import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  condition,
  CRASHING_IMAGE,
  createPool,
  createSandbox,
  eventually,
  NAMESPACE,
  phaseIs,
  readLine,
  RUNNER_IMAGE,
  sandboxPods,
  untilPoolReady,
  clusterForFile,
  waitForSandbox,
} from './harness.js';

const file = clusterForFile();

describe('Sandbox → Pod', () => {
  it('starts a locked-down runner pod owned by the Sandbox, with its own token Secret, and reports Ready with the endpoint', async () => {
    const sandbox = createSandbox(file.cluster, 'sbx-basic', { shutdownTime: new Date(Date.now() + 600_000).toISOString() });
    const ready = await waitForSandbox(file.cluster, 'sbx-basic', phaseIs('Ready'));
    const podName = `sbx-basic-${sandbox.metadata.uid!.replace(/-/g, '').slice(0, 8)}`;
    expect(ready!.status).toMatchObject({
      podName,
      launch: 'cold',
      tokenSecretName: `${podName}-token`,
      observedGeneration: 1,
    });
    expect(condition(ready, 'Ready')).toMatchObject({ status: 'True', reason: 'RunnerReady' });
    expect(condition(ready, 'Admitted')).toMatchObject({ status: 'True' });
    expect(condition(ready, 'Expired')).toMatchObject({ status: 'False' });

    const pod = file.cluster.server.store.get('pods', NAMESPACE, podName) as any;
    expect(pod.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'acis.dev/v1alpha1',
        kind: 'Sandbox',
        name: 'sbx-basic',
        uid: sandbox.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(pod.metadata.labels).toMatchObject({
      'acis.dev/tenant': 'tnt_TESTTENANT1',
      'acis.dev/conversation': (sandbox as any).spec.conversationId,
      'acis.dev/agent-type': 'vendor-agent-sdk',
    });
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.spec.containers[0].securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    const env = Object.fromEntries(pod.spec.containers[0].env.map((e: any) => [e.name, e.value ?? e.valueFrom]));
    // The egress credential: the pod's name and its own egress token, expanded by the kubelet.
    // The proxy's address as the controller resolved ACIS_EGRESS_PROXY_HOST (the harness's) at start: pods have no DNS.
    expect(env.HTTPS_PROXY).toBe('http://$(POD_NAME):$(ACIS_EGRESS_TOKEN)@127.0.0.1:3128');
    expect(env.ACIS_RUNNER_TOKEN).toEqual({ secretKeyRef: { name: `${podName}-token`, key: 'token' } });
    expect(env.ACIS_EGRESS_TOKEN).toEqual({ secretKeyRef: { name: `${podName}-token`, key: 'egress-token' } });

    const secret = file.cluster.server.store.get('secrets', NAMESPACE, `${podName}-token`) as any;
    expect(secret.metadata.ownerReferences[0]).toMatchObject({ kind: 'Sandbox', uid: sandbox.metadata.uid });
    const [token, egressToken] = [secret.data.token, secret.data['egress-token']].map((value) => Buffer.from(value, 'base64').toString());
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(egressToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(egressToken).not.toBe(token);
    expect(await readLine(ready!.status!.endpoint!)).toBe('runner has a token');
  });

  it('deleting the Sandbox removes its pod and Secret', async () => {
    createSandbox(file.cluster, 'sbx-gone');
    const ready = await waitForSandbox(file.cluster, 'sbx-gone', phaseIs('Ready'));
    expect(sandboxPods(file.cluster, 'sbx-gone')).toHaveLength(1);
    file.cluster.server.store.delete('sandboxes', NAMESPACE, 'sbx-gone');
    await eventually(
      file.cluster,
      () =>
        sandboxPods(file.cluster, 'sbx-gone').length === 0 &&
        !file.cluster.server.store.find('secrets', NAMESPACE, ready!.status!.tokenSecretName!),
    );
  });

  it('a runner that crashes fails its Sandbox with a terminal CrashLoop condition that says how', async () => {
    createSandbox(file.cluster, 'sbx-crash', { image: CRASHING_IMAGE });
    const failed = await waitForSandbox(file.cluster, 'sbx-crash', phaseIs('Failed'));
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'CrashLoop' });
    expect(condition(failed, 'Ready')!.message).toContain('exited with code 3');
    // The finished pod stays for `kubectl logs`; a terminal Sandbox never starts another.
    expect(sandboxPods(file.cluster, 'sbx-crash')).toHaveLength(1);
  });

  it('a pooled runner that exits normally after serving is released (Expired, RunnerStopped), not reported as a crash', async () => {
    createPool(file.cluster, 'stopping', 1, 'stopping-agent');
    await untilPoolReady(file.cluster, 'stopping', 1);
    createSandbox(file.cluster, 'sbx-stops', { agentType: 'stopping-agent' });
    const ready = await waitForSandbox(file.cluster, 'sbx-stops', phaseIs('Ready'));
    expect(ready!.status!.launch).toBe('pool');
    const [host, port] = ready!.status!.endpoint!.split(':');
    const socket = connect(Number(port), host!);
    socket.on('error', () => {});
    socket.write('stop\n');
    const released = await waitForSandbox(file.cluster, 'sbx-stops', phaseIs('Expired'));
    expect(condition(released, 'Expired')).toMatchObject({ status: 'True', reason: 'RunnerStopped' });
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.kind === 'Sandbox' && e.involvedObject.name === 'sbx-stops');
    expect(events.map((e: any) => `${e.type} ${e.reason}`)).toContain('Normal RunnerStopped');
    expect(events.filter((e: any) => e.type === 'Warning')).toEqual([]);
    file.cluster.server.store.delete('sandboxwarmpools', NAMESPACE, 'stopping');
  });

  it('an image that cannot be pulled says ImagePullFailed while the kubelet retries, and starts once the registry has it', async () => {
    const image = 'registry.example/late:1';
    createSandbox(file.cluster, 'sbx-late-image', { image });
    const backingOff = await waitForSandbox(file.cluster, 'sbx-late-image', (s) => condition(s, 'Ready')?.reason === 'ImagePullFailed');
    expect(backingOff!.status!.phase).toBe('Starting');
    // The kubelet has failed the pull and is backing off: a transient registry error, not the end of the Sandbox.
    await eventually(file.cluster, () => {
      const [pod] = sandboxPods(file.cluster, 'sbx-late-image') as any[];
      return pod?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff';
    });
    expect((file.cluster.server.store.get('sandboxes', NAMESPACE, 'sbx-late-image') as any).status.phase).toBe('Starting');
    file.cluster.images[image] = file.cluster.images[RUNNER_IMAGE]!;
    await waitForSandbox(file.cluster, 'sbx-late-image', phaseIs('Ready'));
  });
});

describe('idle TTL', () => {
  it('at shutdownTime the pod goes and the Sandbox reports Expired', async () => {
    const shutdownTime = new Date(Date.now() + 1_500).toISOString();
    createSandbox(file.cluster, 'sbx-ttl', { shutdownTime });
    await waitForSandbox(file.cluster, 'sbx-ttl', phaseIs('Ready'));
    const expired = await waitForSandbox(file.cluster, 'sbx-ttl', phaseIs('Expired'));
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(shutdownTime));
    expect(condition(expired, 'Expired')).toMatchObject({ status: 'True', reason: 'ShutdownTimeReached' });
    expect(condition(expired, 'Ready')).toMatchObject({ status: 'False', reason: 'ShutdownTimeReached' });
    await eventually(file.cluster, () => sandboxPods(file.cluster, 'sbx-ttl').length === 0);
  });

  it('a deadline moved forward keeps the runner past the old one', async () => {
    const first = Date.now() + 1_500;
    createSandbox(file.cluster, 'sbx-slide', { shutdownTime: new Date(first).toISOString() });
    await waitForSandbox(file.cluster, 'sbx-slide', phaseIs('Ready'));
    const current = file.cluster.server.store.get('sandboxes', NAMESPACE, 'sbx-slide') as any;
    const moved = first + 2_500;
    file.cluster.server.store.update('sandboxes', NAMESPACE, 'sbx-slide', {
      ...current,
      spec: { ...current.spec, shutdownTime: new Date(moved).toISOString() },
    });
    await new Promise((resolve) => setTimeout(resolve, first - Date.now() + 500));
    expect((file.cluster.server.store.get('sandboxes', NAMESPACE, 'sbx-slide') as any).status.phase).toBe('Ready');
    expect(sandboxPods(file.cluster, 'sbx-slide')).toHaveLength(1);
    const expired = await waitForSandbox(file.cluster, 'sbx-slide', phaseIs('Expired'));
    expect(Date.now()).toBeGreaterThanOrEqual(moved);
    expect(condition(expired, 'Expired')!.reason).toBe('ShutdownTimeReached');
  });
});
