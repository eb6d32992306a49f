/**
 * The bubblewrap recipe for one conversation's runner (the `local` sandbox provider).
 *
 * Inside, the runner sees: the system's /usr (and the /bin, /lib* links or dirs beside it) and a short list
 * of /etc files, read-only; the app (runner code, node_modules) read-only under /opt/acis; its workspace
 * (writable, the cwd) at /workspace; its HOME (writable: the agent keeps config and transcripts there) at
 * /home/agent; a run directory with the Unix sockets it may use at /run/acis; a private /tmp, /dev and /proc.
 * It gets its own user, pid, mount, ipc, uts and cgroup namespaces, and its own network namespace with only
 * loopback: the outside is reachable only through the sockets in /run/acis (see bridge.ts). Nothing of the
 * host's environment is inherited: bwrap is started with exactly the sandbox's environment, which it
 * passes on. The environment never goes on bwrap's command line (`--setenv`): it holds a run's egress
 * credential, and any local user can read /proc/PID/cmdline, while /proc/PID/environ is the owner's only.
 */
import { lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';

export const SANDBOX_WORKSPACE = '/workspace';
export const SANDBOX_HOME = '/home/agent';
export const SANDBOX_APP = '/opt/acis';
export const SANDBOX_RUN = '/run/acis';

export interface Bind {
  source: string;
  target: string;
}

export interface BwrapOptions {
  /** Host directory of this conversation's workspace: writable, mounted at /workspace, the cwd. */
  workspace: string;
  /** Host directory used as HOME: writable. */
  home: string;
  /** Read-only binds the runtime needs beyond the system directories (the app under /opt/acis, a node outside /usr). */
  runtimeDirs: Bind[];
  /** Host directory with the sockets (and generated files) the sandbox may use, mounted read-only at /run/acis. */
  runDir?: string;
  /** The complete environment of the sandbox; HOME, PATH, USER, TMPDIR and LANG have defaults. */
  env?: Record<string, string>;
  /** `none` (the default): own network namespace, loopback only. `host`: the host's network, for debugging only. */
  network?: 'none' | 'host';
  /** Ids inside the sandbox (its user namespace maps them to whoever runs bwrap). */
  uid?: number;
  gid?: number;
  hostname?: string;
  /** The command to run inside, with its arguments. */
  command: string[];
}

/** System directories bound (or re-linked, on merged-/usr systems) at the same path when the host has them. */
const SYSTEM_DIRS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The few /etc entries programs need (dynamic linker, name service, TLS roots, time zone, Debian's
 * alternatives links). The rest of /etc (service configs, shadow files) stays out of sight.
 */
const ETC_ENTRIES = [
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'nsswitch.conf',
  'host.conf',
  'hosts',
  'resolv.conf',
  'localtime',
  'ssl',
  'ca-certificates',
  'alternatives',
];

/** How to start bwrap: its arguments, and the environment to start it with (which the sandbox inherits). */
export interface BwrapCommand {
  args: string[];
  env: Record<string, string>;
}

export function bwrapCommand(options: BwrapOptions): BwrapCommand {
  const uid = options.uid ?? 1000;
  const gid = options.gid ?? 1000;
  const args = ['--unshare-all', '--unshare-user', ...(options.network === 'host' ? ['--share-net'] : [])];
  args.push('--uid', String(uid), '--gid', String(gid), '--disable-userns');
  args.push('--hostname', options.hostname ?? 'acis-sandbox');
  args.push('--die-with-parent', '--new-session', '--cap-drop', 'ALL');

  args.push('--ro-bind', '/usr', '/usr');
  for (const dir of SYSTEM_DIRS) {
    const stat = lstatOrNull(dir);
    if (stat?.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
    else if (stat?.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', path.join('/etc', entry), path.join('/etc', entry));
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');

  for (const bind of options.runtimeDirs) args.push('--ro-bind', bind.source, bind.target);
  if (options.runDir) args.push('--ro-bind', options.runDir, SANDBOX_RUN);
  args.push('--bind', options.home, SANDBOX_HOME);
  args.push('--bind', options.workspace, SANDBOX_WORKSPACE);
  // The root is a tmpfs bwrap built to hold the mount points; freeze it so the only writable places are the
  // workspace, HOME and /tmp (each its own mount, which this non-recursive remount leaves alone).
  args.push('--remount-ro', '/');
  args.push('--chdir', SANDBOX_WORKSPACE);

  const env: Record<string, string> = {
    HOME: SANDBOX_HOME,
    PATH: '/usr/local/bin:/usr/bin:/bin',
    USER: 'agent',
    TMPDIR: '/tmp',
    LANG: 'C.UTF-8',
    ...options.env,
  };
  args.push('--', ...options.command);
  return { args, env };
}

/** Node's install prefix when it lives outside /usr (nvm, a tarball), which the sandbox then needs bound. */
export function nodeRuntimeDirs(execPath = process.execPath): Bind[] {
  const prefix = path.dirname(path.dirname(execPath));
  return prefix === '/usr' || prefix.startsWith('/usr/') ? [] : [{ source: prefix, target: prefix }];
}

function lstatOrNull(file: string) {
  try {
    return lstatSync(file);
  } catch {
    return null;
  }
}

/**
 * How a sandbox starts the runner: node_modules and package.json (for `"type": "module"`) bound
 * read-only under /opt/acis, with either the compiled runner (`dist/runner`, what `npm start` runs:
 * no loader, no transpiling at each start) or, from a source checkout, its TypeScript through tsx's
 * loader. Nothing else of the checkout (notably a data dir holding the master key) is bound.
 */
export function runnerCommand(appRoot: string, compiled: boolean): { runtimeDirs: Bind[]; command: string[] } {
  const common = [
    ...nodeRuntimeDirs(),
    { source: path.join(appRoot, 'node_modules'), target: `${SANDBOX_APP}/node_modules` },
    { source: path.join(appRoot, 'package.json'), target: `${SANDBOX_APP}/package.json` },
  ];
  if (compiled) {
    return {
      runtimeDirs: [...common, { source: path.join(appRoot, 'dist', 'runner'), target: `${SANDBOX_APP}/dist/runner` }],
      command: ['node', `${SANDBOX_APP}/dist/runner/runner.js`],
    };
  }
  return {
    runtimeDirs: [...common, { source: path.join(appRoot, 'runner'), target: `${SANDBOX_APP}/runner` }],
    command: ['node', '--import', `file://${SANDBOX_APP}/node_modules/tsx/dist/esm/index.mjs`, `${SANDBOX_APP}/runner/runner.ts`],
  };
}
