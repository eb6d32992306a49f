/**
 * Conditions as pure functions: a condition keeps its lastTransitionTime while its status stays
 * the same, so recomputing them on every reconcile never makes a status write by itself.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Condition, ConditionStatus, ConditionType, SandboxStatus } from './api/v1alpha1.js';

export interface ConditionInput {
  type: ConditionType;
  status: ConditionStatus;
  reason: string;
  message?: string;
}

export function setCondition(conditions: Condition[] | undefined, next: ConditionInput, now: number, generation?: number): Condition[] {
  const list = conditions ?? [];
  const previous = list.find((c) => c.type === next.type);
  const condition: Condition = {
    type: next.type,
    status: next.status,
    reason: next.reason,
    ...(next.message !== undefined && { message: next.message }),
    lastTransitionTime: previous && previous.status === next.status ? previous.lastTransitionTime : new Date(now).toISOString(),
    ...(generation !== undefined && { observedGeneration: generation }),
  };
  return [...list.filter((c) => c.type !== next.type), condition].sort((a, b) => ORDER.indexOf(a.type) - ORDER.indexOf(b.type));
}

const ORDER: ConditionType[] = ['Ready', 'Admitted', 'Expired', 'Degraded'];

/** Whether a status write would change anything (the one write per reconcile is skipped when not). */
export function statusChanged(before: SandboxStatus | object | undefined, after: SandboxStatus | object): boolean {
  return !isDeepStrictEqual(withoutUndefined(before ?? {}), withoutUndefined(after));
}

/** The value as it is written and read back: fields set to undefined are absent, at any depth. */
export function withoutUndefined<T extends object>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
