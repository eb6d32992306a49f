/**
 * A container's stop, as the kubelet's killContainer does it
 * (https://kubernetes.io/docs/concepts/containers/container-lifecycle-hooks/ and "Termination of
 * Pods" in https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/): the `preStop` hook
 * (exec, httpGet or sleep) runs first, inside the pod's grace period; SIGTERM follows; SIGKILL when
 * what is left of the grace period ends, never sooner than 2 s after the hook (the kubelet's
 * minimum shutdown window). A hook that fails is a `FailedPreStopHook` Event; the stop goes on.
 * Exec hooks run as exec probes do here: the command on the host, with the container's environment.
 */
import type { ContainerSpec } from './kubelet-container.js';
import { runProbe } from './kubelet-container.js';

export interface LifecycleHandler {
  exec?: { command: string[] };
  httpGet?: { port: number | string; path?: string; host?: string };
  sleep?: { seconds: number };
}

/** The kubelet's minimumGracePeriodInSeconds: what a container always gets between SIGTERM and SIGKILL. */
const MINIMUM_STOP_WINDOW_MS = 2000;

export function preStopOf(container: ContainerSpec): LifecycleHandler | undefined {
  return (container as ContainerSpec & { lifecycle?: { preStop?: LifecycleHandler } }).lifecycle?.preStop;
}

/** Time from SIGTERM to SIGKILL: the grace period less what the hook took, at least 2 s. */
export function stopWindowMs(graceSeconds: number, hookMs: number): number {
  return Math.max(graceSeconds * 1000 - hookMs, MINIMUM_STOP_WINDOW_MS);
}

/**
 * Runs a preStop hook for at most `budgetMs` (the grace period): undefined when it succeeded (or
 * ran out of time, as the kubelet then stops waiting and goes on), else why it failed.
 */
export async function runPreStop(
  handler: LifecycleHandler,
  container: ContainerSpec,
  podIP: string,
  env: Record<string, string>,
  netns: string | undefined,
  budgetMs: number,
): Promise<string | undefined> {
  if (handler.sleep) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(handler.sleep!.seconds * 1000, budgetMs)));
    return undefined;
  }
  const started = Date.now();
  const ok = await runProbe({ exec: handler.exec, httpGet: handler.httpGet }, container, podIP, env, netns, budgetMs);
  if (ok || Date.now() - started >= budgetMs) return undefined;
  if (handler.exec) return `Exec lifecycle hook (${JSON.stringify(handler.exec.command)}) for Container "${container.name}" failed`;
  if (handler.httpGet) return `HTTP lifecycle hook (${handler.httpGet.path ?? '/'}) for Container "${container.name}" failed`;
  return undefined;
}
