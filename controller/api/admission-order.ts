/**
 * The admission order over Kubernetes objects: the controller admits waiting Sandboxes in it and
 * hands out pool pods in it, and the API server tells a queued caller its place in it. Built on the
 * policy's one comparator (sandbox-policy/admission.ts): creation time, then name, since creation
 * times are whole seconds and two claims of the same second must still line up the same way
 * everywhere.
 */
import { type AdmissionCandidate, compareAdmissionOrder } from '../../sandbox-policy/admission.js';
import type { Sandbox } from './v1alpha1.js';
import { standingOf } from './sandbox-status.js';

/** What the order reads of an object: a Sandbox, a pod. */
export interface CreatedObject {
  metadata?: { name?: string | undefined; creationTimestamp?: string | Date | undefined } | undefined;
}

/** When the object was created (ms); 0 when it says nothing readable (a hand-made object): first in line. */
export function creationTime(object: CreatedObject): number {
  const at = object.metadata?.creationTimestamp;
  const ms = at ? new Date(at).getTime() : 0;
  return Number.isNaN(ms) ? 0 : ms;
}

/** The object as a candidate of the policy's admission order: its creation time, its name for ties. */
export function admissionCandidate(object: CreatedObject): AdmissionCandidate {
  return { id: object.metadata?.name ?? '', createdAt: creationTime(object) };
}

/** The admission order as a comparator of objects (for `sort`): the earliest created first, then by name. */
export function inAdmissionOrder(a: CreatedObject, b: CreatedObject): number {
  return compareAdmissionOrder(admissionCandidate(a), admissionCandidate(b));
}

/**
 * Where a queued Sandbox stands in the controller's admission line (1 = admitted next): one plus
 * the waiting Sandboxes before it in admission order.
 */
export function queuePosition(sandboxes: readonly Sandbox[], name: string): number {
  const own = sandboxes.find((s) => s.metadata.name === name);
  if (!own) return 1;
  return 1 + sandboxes.filter((s) => s.metadata.name !== name && standingOf(s).kind === 'queued' && inAdmissionOrder(s, own) < 0).length;
}
