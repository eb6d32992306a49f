/**
 * The runner image as the simulated kubelet runs it: the runner from this checkout (in bubblewrap,
 * as the local provider starts it; its sources, or its build with `compiled` as the image has it), doing what the image's ENV and entrypoint do
 * (images/runner: the trust bundle of the mounted egress CA written into /tmp). The simulated pods
 * share the host's network, each on its own loopback IP, so the runner listens on that IP as a real
 * pod's 0.0.0.0 would.
 */
import { runnerCommand } from '../../runner/bwrap.js';
import type { KubeletImage } from './kubelet.js';

export function runnerImage(appRoot: string, options: { compiled?: boolean } = {}): KubeletImage {
  const { runtimeDirs, command } = runnerCommand(appRoot, options.compiled ?? false);
  return {
    command: '/bin/sh',
    args: [
      '-c',
      '{ cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; cat "$ACIS_EGRESS_CA_FILE"; } > /tmp/acis-ca-bundle.pem && ' +
        `ACIS_RUNNER_LISTEN="$POD_IP:$ACIS_RUNNER_PORT" exec "$0" "$@"`,
      process.execPath,
      ...command.slice(1),
    ],
    binds: runtimeDirs,
    env: { CLAUDE_CONFIG_DIR: '/workspace/.home/.claude', ACIS_SESSION_STORE: '1' },
  };
}
