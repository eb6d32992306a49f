/**
 * Where a pooled first message's time goes under the kubernetes provider, as the cluster sees it:
 * for each measured turn, the ms from sending the message to each step of the claim that reaches
 * the Kubernetes API (the API server's Sandbox create, the controller's adoption patch of the pool
 * pod, the status write that binds it and the one that says Ready, the API server's read of the
 * runner's token Secret, negative when it was read ahead while the pod waited in its pool), and to the
 * first agent line. What lies between the token read and the
 * first line is the runner connection (connect, hello), the turn sent and the runtime's answer.
 * The API test server runs in the bench process, so its clock is the client's.
 */
import { sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';
import type { KubeTestServer } from '../k8s/server.js';
import type { KubeObject } from '../k8s/store.js';
import type { TurnTiming } from './sdk-floors.js';

export const CLAIM_STEPS = ['sandbox created', 'pod adopted', 'status bound', 'status Ready', 'token read', 'first line'] as const;
export type ClaimStep = (typeof CLAIM_STEPS)[number];

interface Seen {
  created?: number;
  adopted?: number;
  bound?: number;
  ready?: number;
  pod?: string;
}

export interface ClaimTrace {
  /** A measured turn: its conversation, when its message was sent and its timing. */
  turn(conversationId: string, sentAt: number, timing: TurnTiming): void;
  /** Per step, the ms after the message was sent, one value per measured turn that reached it. */
  steps(): Record<ClaimStep, number[]>;
  close(): void;
}

export function traceClaims(cluster: KubeTestServer): ClaimTrace {
  const bySandbox = new Map<string, Seen>();
  /** A runner pod's first token read, by pod name: the claim's, or the API server's ahead of any claim. */
  const tokenReads = new Map<string, number>();
  const seen = (name: string) => bySandbox.get(name) ?? bySandbox.set(name, {}).get(name)!;
  const unsubscribe = cluster.store.store.subscribe((change) => {
    const at = performance.now();
    const object = change.object as KubeObject & { status?: { phase?: string; podName?: string } };
    const name = object.metadata.name;
    if (!name) return;
    if (change.storageKey === 'acis.dev/sandboxes') {
      const entry = seen(name);
      if (change.type === 'ADDED') entry.created ??= at;
      if (object.status?.podName && entry.bound === undefined) {
        entry.bound = at;
        entry.pod ??= object.status.podName;
      }
      if (object.status?.phase === 'Ready') entry.ready ??= at;
    } else if (change.storageKey === '/pods') {
      const owner = object.metadata.ownerReferences?.find((ref) => ref.controller && ref.kind === 'Sandbox');
      if (owner) {
        const entry = seen(owner.name);
        entry.adopted ??= at;
        entry.pod ??= name;
      }
    }
  });
  // Reads leave no change in the store: the token read is seen as its request arrives.
  const requests = cluster.requests;
  const push = requests.push;
  requests.push = (...records) => {
    const at = performance.now();
    for (const record of records) {
      if (record.resource !== 'secrets' || record.verb !== 'get' || !record.name?.endsWith('-token')) continue;
      const pod = record.name.slice(0, -'-token'.length);
      if (!tokenReads.has(pod)) tokenReads.set(pod, at);
    }
    return push.apply(requests, records);
  };

  const steps: Record<ClaimStep, number[]> = Object.fromEntries(CLAIM_STEPS.map((step) => [step, []])) as unknown as Record<
    ClaimStep,
    number[]
  >;
  return {
    turn(conversationId, sentAt, timing) {
      const entry = bySandbox.get(sandboxName(conversationId)) ?? {};
      const add = (step: ClaimStep, at: number | undefined) => at !== undefined && steps[step].push(at - sentAt);
      add('sandbox created', entry.created);
      add('pod adopted', entry.adopted);
      add('status bound', entry.bound);
      add('status Ready', entry.ready);
      add('token read', entry.pod === undefined ? undefined : tokenReads.get(entry.pod));
      steps['first line'].push(timing.firstLineMs);
    },
    steps: () => steps,
    close() {
      unsubscribe();
      requests.push = push;
    },
  };
}
