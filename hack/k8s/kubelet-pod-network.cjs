/**
 * Preloaded into each container's Node programs by the simulated kubelet (kubelet-pod-network.ts):
 * a listen on every address (`0.0.0.0`, `::` or no host) lands on the pod's own IP instead.
 *
 * On a cluster a pod has its own network namespace, so a wildcard bind holds the port on the pod's
 * addresses only. Simulated pods share the host's network: without this, a pod listening on 0.0.0.0
 * would hold its port on every loopback address, and fail (then crash-loop) when any process of the
 * machine held that port anywhere first. Listens on a named address are left as they are.
 */
'use strict';
const net = require('node:net');

const podIP = process.env.KUBELET_TEST_POD_IP;
const WILDCARDS = new Set([undefined, null, '', '0.0.0.0', '::']);

if (podIP) {
  // setupListenHandle(address, port, addressType, backlog, fd, flags): where every TCP listen of
  // net, http and https ends up (a listen without a host tries `::`, then `0.0.0.0`, from here).
  const setupListenHandle = net.Server.prototype._listen2;
  net.Server.prototype._listen2 = function (address, port, addressType, backlog, fd, flags) {
    const wildcard = WILDCARDS.has(address) && !(typeof fd === 'number' && fd >= 0);
    return wildcard
      ? setupListenHandle.call(this, podIP, port, 4, backlog, fd, flags)
      : setupListenHandle.call(this, address, port, addressType, backlog, fd, flags);
  };
}
