/**
 * The admission order: who gets a freed place first when requests wait for capacity. The earliest
 * asked comes first, and requests asked at the same moment (Kubernetes keeps creation times in whole
 * seconds) go by id, so every replica, the local provider and the controller put the same line in
 * the same order, and a later request never overtakes an earlier one.
 */

export interface AdmissionCandidate {
  id: string;
  /** When it asked (ms). */
  createdAt: number;
}

/** The one comparator of the admission order: creation time, then id. */
export function compareAdmissionOrder(a: AdmissionCandidate, b: AdmissionCandidate): number {
  return a.createdAt - b.createdAt || a.id.localeCompare(b.id);
}

/**
 * Which waiting requests get capacity now, in admission order, when `used` of `maxSandboxes` places
 * are taken: a queue drains first come first served as capacity frees.
 */
export function admitInOrder(waiting: AdmissionCandidate[], used: number, maxSandboxes: number): string[] {
  const free = Math.max(0, maxSandboxes - used);
  return [...waiting]
    .sort(compareAdmissionOrder)
    .slice(0, free)
    .map((c) => c.id);
}
