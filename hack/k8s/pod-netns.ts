/**
 * Pods in network namespaces of their own (the kubelet's `netns` network mode), made with iproute2
 * and nftables as a bridge CNI plugin makes them ("Cluster Networking": every pod gets its own IP,
 * pods reach each other without NAT):
 * - one Linux bridge per test process, `acisbr<pid>`, holding the node's address (.1) of a /24 of
 *   10.128.0.0/9 picked by the pid (as the loopback mode picks its block), so the test files running
 *   side by side each have a network of their own;
 * - per pod a network namespace `acis-<pid>-<n>` with a veth `eth0` into the bridge, an IP of the
 *   /24 and a default route via the node's address; unprivileged ports start at 0 inside, as
 *   container runtimes set (a non-root container may listen on 53 or 80);
 * - the host reaches pods on the bridge; pods reach the host's processes, which listen on
 *   127.0.0.1, at the node's address: a DNAT to 127.0.0.1 in the table `ip acis-kubelet-<pid>`
 *   (with route_localnet on the bridge only). Host forwarding stays off: a pod reaches no other
 *   network than its bridge and the node.
 * Names carry the pid, so what a crashed run left is found and removed by the next process.
 */
import { spawn } from 'node:child_process';

export type NetworkMode = 'netns' | 'loopback';

/** Runs a program, resolving to its stdout; rejects with its stderr when it fails. */
export function run(command: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr.trim()}`)),
    );
    child.stdin.on('error', () => {}); // a program that reads no input closes it early
    child.stdin.end(input ?? '');
  });
}

let probed: Promise<NetworkMode> | undefined;

/** Whether this machine lets us make network namespaces and nftables rules (root, or CAP_NET_ADMIN and CAP_SYS_ADMIN): checked once per process. */
export function probeNetworkMode(): Promise<NetworkMode> {
  probed ??= (async () => {
    const name = `acis-${process.pid}-probe`;
    try {
      await run('sh', ['-ec', `ip netns add ${name}; trap 'ip netns del ${name}' EXIT; nsenter --net=/run/netns/${name} nft list tables`]);
      return 'netns';
    } catch {
      return 'loopback';
    }
  })();
  return probed;
}

function alive(pid: number): boolean {
  if (pid === process.pid) return false; // a leftover of an earlier process with our pid
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the namespaces, bridges and tables of processes that are gone (and stale ones of our pid). */
async function removeLeftovers(): Promise<void> {
  const stale = (name: string, pattern: RegExp) => {
    const match = pattern.exec(name);
    return match !== null && !alive(Number(match[1]));
  };
  const namespaces = (await run('ip', ['netns', 'list'])).split('\n').map((line) => line.split(' ')[0]!);
  const bridges = (await run('ip', ['-o', 'link', 'show', 'type', 'bridge']))
    .split('\n')
    .map((line) => line.split(': ')[1]?.split('@')[0] ?? '');
  const tables = (await run('nft', ['list', 'tables'])).split('\n').map((line) => line.replace(/^table ip /, ''));
  const script = [
    ...namespaces.filter((name) => stale(name, /^acis-(\d+)-/)).map((name) => `ip netns del ${name}`),
    ...bridges.filter((name) => stale(name, /^acisbr(\d+)$/)).map((name) => `ip link del ${name}`),
    ...tables.filter((name) => stale(name, /^acis-kubelet-(\d+)$/)).map((name) => `nft delete table ip ${name}`),
  ];
  if (script.length) await run('sh', ['-c', script.map((line) => `${line} 2>/dev/null`).join('\n')]);
}

export interface PodAttachment {
  ip: string;
  /** The namespace's path, for nsenter --net. */
  netns: string;
  name: string;
}

export interface PodNetworkHost {
  /** The node's address as pods see it: the host's processes (on 127.0.0.1) are reached there. */
  nodeAddress: string;
  subnet: string;
  attach(): Promise<PodAttachment>;
  detach(pod: PodAttachment): Promise<void>;
  /** Replaces the rules of a pod's namespace with an nft script. */
  applyRules(pod: PodAttachment, ruleset: string): Promise<void>;
  release(): Promise<void>;
}

/** The node's /24 of this process: 10.128.0.0/9 holds 2^15 of them, one per pid block (as the loopback mode's). */
export function podSubnet(pid = process.pid): { prefix: string; nodeAddress: string } {
  const block = 1 + ((pid - 1) % ((1 << 15) - 1));
  const prefix = `10.${128 + (block >> 8)}.${block & 255}`;
  return { prefix, nodeAddress: `${prefix}.1` };
}

/** The pod addresses of the /24 (.2 to .254): what the kubelets of this process share. */
export const POD_ADDRESSES = 253;

let shared: { host: Promise<PodNetworkHost>; users: number } | undefined;

/** The process's pod network, made on first use and removed when its last kubelet releases it. */
export function acquirePodNetwork(): Promise<PodNetworkHost> {
  if (shared) {
    shared.users++;
    return shared.host;
  }
  shared = { host: createPodNetwork(), users: 1 };
  return shared.host;
}

async function createPodNetwork(): Promise<PodNetworkHost> {
  await removeLeftovers();
  const pid = process.pid;
  const bridge = `acisbr${pid}`;
  const table = `acis-kubelet-${pid}`;
  const { prefix, nodeAddress } = podSubnet(pid);
  await run(
    'sh',
    ['-e'],
    `ip link add ${bridge} type bridge
ip addr add ${nodeAddress}/24 dev ${bridge}
ip link set ${bridge} up
echo 1 > /proc/sys/net/ipv4/conf/${bridge}/route_localnet
nft -f - <<'NFT'
table ip ${table} {
  chain prerouting {
    type nat hook prerouting priority -100; policy accept;
    iifname "${bridge}" ip daddr ${nodeAddress} dnat to 127.0.0.1
  }
}
NFT
`,
  );
  let counter = 0;
  const used = new Set<number>();
  const attach = async (): Promise<PodAttachment> => {
    let host = 0;
    for (let tries = 0; tries < POD_ADDRESSES && (host === 0 || used.has(host)); tries++)
      host = 2 + ((counter++ % POD_ADDRESSES) as number);
    if (used.has(host)) throw new Error(`no free pod address left in ${prefix}.0/24`);
    used.add(host);
    const name = `acis-${pid}-${host}`;
    const ip = `${prefix}.${host}`;
    const hostSide = `av${pid}x${host}`;
    try {
      await run(
        'sh',
        ['-e'],
        `ip netns add ${name}
ip link add ${hostSide} type veth peer name eth0 netns ${name}
ip link set ${hostSide} master ${bridge} up
ip -n ${name} -b - <<'IP'
link set lo up
addr add ${ip}/24 dev eth0
link set eth0 up
route add default via ${nodeAddress}
IP
nsenter --net=/run/netns/${name} sh -c 'echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start'
`,
      );
    } catch (error) {
      used.delete(host);
      await run('ip', ['netns', 'del', name]).catch(() => {});
      throw error;
    }
    return { ip, name, netns: `/run/netns/${name}` };
  };
  const detach = async (pod: PodAttachment) => {
    await run('ip', ['netns', 'del', pod.name]).catch(() => {});
    used.delete(Number(pod.ip.split('.')[3]));
  };
  return {
    nodeAddress,
    subnet: `${prefix}.0/24`,
    attach,
    detach,
    applyRules: async (pod, ruleset) => {
      await run('nsenter', [`--net=${pod.netns}`, 'nft', '-f', '-'], ruleset);
    },
    release: async () => {
      if (!shared || --shared.users > 0) return;
      shared = undefined;
      await run('sh', ['-c', `ip link del ${bridge}; nft delete table ip ${table}`]).catch(() => {});
    },
  };
}
