/**
 * The pod network of the simulated kubelet. On a cluster each pod has its own network namespace and
 * IP ("Cluster Networking": every pod gets its own unique cluster-wide IP address; containers in a pod
 * share it): nothing outside the pod can hold the ports it listens on. Simulated pods share the
 * host's network instead, so the kubelet makes the equivalent out of two parts:
 * - each pod gets a loopback address of its own, unique across the test processes of the machine
 *   (test files run side by side, each with its own kubelets), not only within this process;
 * - a container's Node programs get a preload (kubelet-pod-network.cjs) that makes a listen on every
 *   address land on that pod IP, so `0.0.0.0:8080` in one pod takes 8080 from no other process.
 * Programs other than Node's are not covered (every image the tests map runs node).
 */
import { fileURLToPath } from 'node:url';
import type { Bind } from '../../runner/bwrap.js';

/** The preload on the host, and where containers in bubblewrap see it (apart from the image's paths). */
const PRELOAD = fileURLToPath(new URL('./kubelet-pod-network.cjs', import.meta.url));
const PRELOAD_IN_SANDBOX = '/run/kubelet-test/pod-network.cjs';

/** Pod IPs per process: 127.0.0.0/8 leaves 24 bits, of which the pid takes 15 and a counter 9. */
const PID_BITS = 15;
const POD_BITS = 9;
let nextPod = 1;

/**
 * The next pod IP of this process: 127.x.y.z with a block of the process id in the high bits and a
 * counter in the low ones. Blocks 1 to 2^15 - 1 are pids 1 to 32767 one to one (Debian's default
 * pid_max, so unique between live processes there; above it two processes share a block only when
 * their pids agree modulo 32767). Block 0, 127.0.0.0/23, is never used: 127.0.0.1 stays everyone
 * else's. After 510 pods the counter wraps, reusing an IP long after the pod that had it ended.
 */
export function allocatePodIP(pid = process.pid): string {
  let pod = nextPod;
  // No .0 or .255 host parts: they read as network and broadcast addresses.
  while ((pod & 255) === 0 || (pod & 255) === 255) pod = (pod + 1) % (1 << POD_BITS);
  nextPod = (pod + 1) % (1 << POD_BITS);
  const block = 1 + ((pid - 1) % ((1 << PID_BITS) - 1));
  const address = (block << POD_BITS) | pod;
  return `127.${(address >> 16) & 255}.${(address >> 8) & 255}.${address & 255}`;
}

/** What the kubelet adds to a container for the preload: the pod IP and NODE_OPTIONS requiring it in its environment, the file bound. */
export function podNetwork(
  podIP: string,
  isolation: 'bwrap' | 'none',
  env: Record<string, string>,
): { env: Record<string, string>; binds: Bind[] } {
  const preload = isolation === 'bwrap' ? PRELOAD_IN_SANDBOX : PRELOAD;
  const require = `--require "${preload}"`;
  return {
    env: { KUBELET_TEST_POD_IP: podIP, NODE_OPTIONS: env.NODE_OPTIONS ? `${require} ${env.NODE_OPTIONS}` : require },
    binds: isolation === 'bwrap' ? [{ source: PRELOAD, target: PRELOAD_IN_SANDBOX }] : [],
  };
}
