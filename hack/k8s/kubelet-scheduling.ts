/**
 * The scheduler's one question, for a single node: does a pod's request (cpu, memory, one pod slot)
 * fit in what the node's live pods leave of its allocatable? Requests default to limits, as the API
 * server defaults them. Pure functions over pod objects.
 */
import type { ContainerSpec } from './kubelet-container.js';
import { parseQuantity } from '../../kube/quantity.js';
import type { KubeObject } from './store.js';

export interface Resources {
  cpu: number;
  memory: number;
  pods: number;
}

export function isTerminal(pod: KubeObject): boolean {
  const phase = (pod.status as { phase?: string } | undefined)?.phase;
  return phase === 'Succeeded' || phase === 'Failed';
}

export function podResources(pod: KubeObject): Resources {
  let cpu = 0;
  let memory = 0;
  for (const container of (pod.spec as { containers?: ContainerSpec[] }).containers ?? []) {
    const requests = { ...container.resources?.limits, ...container.resources?.requests };
    cpu += parseQuantity(requests.cpu);
    memory += parseQuantity(requests.memory);
  }
  return { cpu, memory, pods: 1 };
}

/** What the pods bound to a node and not yet ended take of it. */
export function usage(pods: readonly KubeObject[], nodeName: string): Resources {
  const used: Resources = { cpu: 0, memory: 0, pods: 0 };
  for (const pod of pods) {
    if ((pod.spec as { nodeName?: string }).nodeName !== nodeName || isTerminal(pod)) continue;
    const resources = podResources(pod);
    used.cpu += resources.cpu;
    used.memory += resources.memory;
    used.pods += 1;
  }
  return used;
}

/** The scheduler's reasons a pod does not fit; empty when it does. */
export function missingResources(allocatable: Resources, used: Resources, wanted: Resources): string[] {
  const lacking: string[] = [];
  // Millicores are parsed as fractions: allow for the rounding of their sum.
  if (used.cpu + wanted.cpu > allocatable.cpu + 1e-9) lacking.push('Insufficient cpu');
  if (used.memory + wanted.memory > allocatable.memory) lacking.push('Insufficient memory');
  if (used.pods + wanted.pods > allocatable.pods) lacking.push('Too many pods');
  return lacking;
}

export function unschedulableMessage(lacking: string[]): string {
  return `0/1 nodes are available: ${lacking.map((reason) => `1 ${reason}`).join(', ')}. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.`;
}
