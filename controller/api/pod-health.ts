/**
 * What a runner pod's status means for its Sandbox, in reasons a user can act on. Pure: a pod as
 * the kubelet reports it → starting, ready or failed (terminal or not yet).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { REASONS } from './v1alpha1.js';

export type PodHealth =
  | { state: 'ready'; podIP: string }
  | { state: 'starting'; reason: string; message: string }
  /** Not ready and, unless `terminal`, possibly never: the start deadline decides. */
  | { state: 'failing'; reason: string; message: string; terminal: boolean };

const PULL_FAILURES = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull']);
/**
 * No retry can fix these (a malformed name, a pull the policy forbids). ErrImagePull and
 * ImagePullBackOff are not final: the kubelet retries with its back-off and one transient registry
 * error must not fail a Sandbox, so the start deadline decides (with ImagePullFailed as the reason).
 */
const PULL_GIVEN_UP = new Set(['InvalidImageName', 'ErrImageNeverPull']);

export function podHealth(pod: V1Pod): PodHealth {
  const status = pod.status ?? {};
  const container = status.containerStatuses?.[0];
  if (status.phase === 'Failed' || status.phase === 'Succeeded') {
    const terminated = container?.state?.terminated ?? container?.lastState?.terminated;
    const detail = terminated
      ? `the runner exited with code ${terminated.exitCode}${terminated.reason ? ` (${terminated.reason})` : ''}`
      : `the pod ${status.phase === 'Failed' ? 'failed' : 'ended'}${status.reason ? ` (${status.reason})` : ''}`;
    return {
      state: 'failing',
      reason: REASONS.crashLoop,
      message: `${detail}; see kubectl logs pod/${pod.metadata?.name}`,
      terminal: true,
    };
  }
  const waiting = container?.state?.waiting;
  if (waiting?.reason === 'CrashLoopBackOff' || (container?.restartCount ?? 0) > 0) {
    const last = container?.lastState?.terminated;
    return {
      state: 'failing',
      reason: REASONS.crashLoop,
      message: `the runner keeps exiting${last ? ` (last exit code ${last.exitCode})` : ''}; see kubectl logs pod/${pod.metadata?.name} --previous`,
      terminal: true,
    };
  }
  if (waiting?.reason && PULL_FAILURES.has(waiting.reason)) {
    return {
      state: 'failing',
      reason: REASONS.imagePullFailed,
      message: `image ${pod.spec?.containers[0]?.image} cannot be pulled (${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''})`,
      terminal: PULL_GIVEN_UP.has(waiting.reason),
    };
  }
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    return {
      state: 'failing',
      reason: REASONS.unschedulable,
      message: `no node can run it: ${scheduled.message ?? 'unschedulable'}`,
      terminal: false,
    };
  }
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  if (status.phase === 'Running' && ready?.status === 'True' && status.podIP) return { state: 'ready', podIP: status.podIP };
  return {
    state: 'starting',
    reason: REASONS.starting,
    message: waiting?.reason ? `the runner is starting (${waiting.reason})` : 'the runner is starting',
  };
}

export function isPodReady(pod: V1Pod): boolean {
  return !pod.metadata?.deletionTimestamp && podHealth(pod).state === 'ready';
}
