/**
 * How long the simulated kubelet takes, as a setting (`startKubelet({ timings })`):
 *
 * - `fast` (the default, so the suites stay quick): no image pull or container start time, readiness
 *   probed every `probePeriodMs` (100 ms) from the start, initialDelaySeconds ignored.
 * - `realistic`: probes as the kubelet runs them, with the Probe API's defaults
 *   (https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/#configure-probes:
 *   periodSeconds 10, initialDelaySeconds 0): the first probe when the container has run
 *   initialDelaySeconds, then one every periodSeconds, so a program not yet listening at its first
 *   probe waits a whole period. An image is pulled once per node (imagePullPolicy IfNotPresent;
 *   `Always` checks the registry each start), and each container start costs the runtime's pod
 *   sandbox and container creation. Those two are drawn from log-normal distributions with a seeded
 *   generator (`timingSeed`, default 1), so a run repeats: image pull median 1.5 s (p99 about 4.8 s),
 *   registry check 200 ms, sandbox and container start median 600 ms (p99 about 1.5 s). These are
 *   chosen values, not measurements: they sit inside the upstream pod startup SLO (p99 ≤ 5 s from
 *   creation to running, image pulls excluded:
 *   https://github.com/kubernetes/community/blob/master/sig-scalability/slos/pod_startup_latency.md).
 */

export type KubeletTimingsMode = 'fast' | 'realistic';

export interface ProbeTiming {
  initialDelaySeconds?: number;
  periodSeconds?: number;
}

export interface KubeletTimings {
  mode: KubeletTimingsMode;
  /** Time before a container's program starts: an image pull (first use on this node, or `Always`) and the runtime's start. */
  beforeStartMs(image: string, pullPolicy: string | undefined): { pullMs: number; startMs: number };
  /** Time from a container's start to its first readiness probe. */
  firstProbeMs(probe: ProbeTiming): number;
  /** Time between readiness probes. */
  periodMs(probe: ProbeTiming): number;
}

/** mulberry32: a small seeded generator, so a realistic run draws the same delays each time. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

/** A log-normal draw of the given median and sigma (Box-Muller). */
function logNormal(random: () => number, medianMs: number, sigma: number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.round(medianMs * Math.exp(sigma * normal));
}

const PULL = { medianMs: 1500, sigma: 0.5 };
const REGISTRY_CHECK = { medianMs: 200, sigma: 0.3 };
const START = { medianMs: 600, sigma: 0.4 };
const DEFAULT_PERIOD_SECONDS = 10;

export function kubeletTimings(mode: KubeletTimingsMode, probePeriodMs: number, seed = 1): KubeletTimings {
  if (mode === 'fast') {
    return {
      mode,
      beforeStartMs: () => ({ pullMs: 0, startMs: 0 }),
      firstProbeMs: () => probePeriodMs,
      periodMs: () => probePeriodMs,
    };
  }
  const random = seeded(seed);
  const pulled = new Set<string>();
  return {
    mode,
    beforeStartMs(image, pullPolicy) {
      const cached = pulled.has(image);
      pulled.add(image);
      const pull = pullPolicy === 'Always' ? (cached ? REGISTRY_CHECK : PULL) : cached ? undefined : PULL;
      return { pullMs: pull ? logNormal(random, pull.medianMs, pull.sigma) : 0, startMs: logNormal(random, START.medianMs, START.sigma) };
    },
    firstProbeMs: (probe) => (probe.initialDelaySeconds ?? 0) * 1000,
    periodMs: (probe) => (probe.periodSeconds ?? DEFAULT_PERIOD_SECONDS) * 1000,
  };
}
