import { describe, expect, it } from 'vitest';
import { clusterForFile, createSandbox, eventually, NAMESPACE, readLine, type SandboxObject, waitForSandbox } from './harness.js';

// A real garbage collector removes an owner's dependents a while after the owner went; this one
// waits long enough that the earlier Sandbox's pod and Secret are surely still there when the new
// one is served.
const file = clusterForFile({ cluster: { garbageCollectorDelayMs: 8_000 } });

const tokenOf = (secret: any) => Buffer.from(secret.data.token, 'base64').toString();
const ownerUid = (object: any) => object.metadata.ownerReferences?.[0]?.uid;

describe('a Sandbox re-created under the same name', () => {
  it('gets its own pod and token Secret while the garbage collector still removes the earlier one’s', async () => {
    const { store } = file.cluster.server;
    const first = createSandbox(file.cluster, 'sbx-again');
    const served = await waitForSandbox(file.cluster, 'sbx-again', (s) => s?.status?.phase === 'Ready');
    const oldPod = store.get('pods', NAMESPACE, served!.status!.podName!);
    const oldSecret = store.get('secrets', NAMESPACE, served!.status!.tokenSecretName!);
    expect(ownerUid(oldPod)).toBe(first.metadata.uid);

    // The conversation's next turn: its Sandbox deleted, a new one of the same name made at once.
    store.delete('sandboxes', NAMESPACE, 'sbx-again');
    const second = createSandbox(file.cluster, 'sbx-again');
    const isSecond = (s: SandboxObject | undefined) => s?.metadata.uid === second.metadata.uid;
    const ready = await waitForSandbox(file.cluster, 'sbx-again', (s) => isSecond(s) && s?.status?.phase === 'Ready');

    // The earlier pod and Secret are still being collected, and the new Sandbox uses neither.
    expect(store.find('pods', NAMESPACE, oldPod.metadata.name!)?.metadata.uid).toBe(oldPod.metadata.uid);
    expect(store.find('secrets', NAMESPACE, oldSecret.metadata.name!)?.metadata.uid).toBe(oldSecret.metadata.uid);
    const { podName, tokenSecretName } = ready!.status!;
    expect(podName).not.toBe(oldPod.metadata.name);
    expect(tokenSecretName).not.toBe(oldSecret.metadata.name);
    const pod = store.get('pods', NAMESPACE, podName!) as any;
    const secret = store.get('secrets', NAMESPACE, tokenSecretName!) as any;
    expect(ownerUid(pod)).toBe(second.metadata.uid);
    expect(ownerUid(secret)).toBe(second.metadata.uid);
    expect(pod.spec.containers[0].env.find((e: any) => e.name === 'ACIS_RUNNER_TOKEN').valueFrom.secretKeyRef.name).toBe(tokenSecretName);
    expect(tokenOf(secret)).not.toBe(tokenOf(oldSecret));
    expect(await readLine(ready!.status!.endpoint!)).toBe('runner has a token');

    // Once collected, only the new Sandbox's pod and Secret are left, and it still serves.
    await eventually(
      file.cluster,
      () => !store.find('pods', NAMESPACE, oldPod.metadata.name!) && !store.find('secrets', NAMESPACE, oldSecret.metadata.name!),
      30_000,
    );
    expect(store.get('pods', NAMESPACE, podName!).metadata.uid).toBe(pod.metadata.uid);
    expect((store.get('sandboxes', NAMESPACE, 'sbx-again') as SandboxObject).status).toMatchObject({ phase: 'Ready', podName });
  }, 60_000);
});
