/**
 * What a wait that timed out on a pod says of it, so that a failure names its cause without a
 * rerun: each container's state, restarts, last termination (exit code, reason and termination
 * message, as `kubectl describe pod` shows them) and its last log lines (as `kubectl logs` would).
 */
import type { KubeObject } from './store.js';

const LOG_TAIL_LINES = 20;

interface Terminated {
  exitCode: number;
  reason?: string;
  message?: string;
}

interface ContainerStatus {
  name: string;
  restartCount?: number;
  state?: { waiting?: { reason?: string; message?: string }; running?: unknown; terminated?: Terminated };
  lastState?: { terminated?: Terminated };
}

/** A container's last log lines (the kubelet's, once one runs). */
export type PodLogProvider = (namespace: string, name: string, container: string | undefined, tailLines: number | undefined) => string;

export function podReport(pod: KubeObject, logs: PodLogProvider | undefined): string {
  const statuses = (pod.status as { containerStatuses?: ContainerStatus[] } | undefined)?.containerStatuses ?? [];
  return statuses.map((status) => containerReport(pod, status, logs)).join('\n');
}

function containerReport(pod: KubeObject, status: ContainerStatus, logs: PodLogProvider | undefined): string {
  const lines = [`container ${status.name}: ${stateText(status.state)}, ${status.restartCount ?? 0} restarts`];
  if (status.lastState?.terminated) lines.push(`  last state: ${terminatedText(status.lastState.terminated)}`);
  const tail = logTail(pod, status.name, logs);
  if (tail) lines.push(`  last ${LOG_TAIL_LINES} log lines:`, ...tail.split('\n').map((line) => `  | ${line}`));
  return lines.join('\n');
}

function stateText(state: ContainerStatus['state']): string {
  if (state?.terminated) return terminatedText(state.terminated);
  if (state?.waiting) return `waiting ${state.waiting.reason ?? ''}${state.waiting.message ? ` (${state.waiting.message})` : ''}`;
  return state?.running ? 'running' : 'no state';
}

function terminatedText(terminated: Terminated): string {
  return `terminated, exit code ${terminated.exitCode} ${terminated.reason ?? ''}${terminated.message ? `: ${JSON.stringify(terminated.message)}` : ''}`;
}

/** The container's last log lines, or nothing when no kubelet runs the pod (any more). */
function logTail(pod: KubeObject, container: string, logs: PodLogProvider | undefined): string {
  try {
    return logs?.(pod.metadata.namespace!, pod.metadata.name!, container, LOG_TAIL_LINES).trimEnd() ?? '';
  } catch {
    return '';
  }
}
