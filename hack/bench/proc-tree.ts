import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import { machineCpuMs, processCpuMs } from './cpu.js';

/**
 * Process trees read from /proc (Linux): a runner is several processes (bwrap, the node runner, the
 * agent runtime's CLI), so its memory and CPU are sums over its tree.
 */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  /** The kernel's short command name (`node`, `bwrap`, `claude`). */
  name: string;
  /** Resident memory (VmRSS) in KiB; 0 for a process that is gone. */
  rssKb: number;
}

/** The fields of /proc/<pid>/stat after the command name (state first); undefined when it is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function parentOf(pid: number): number | undefined {
  const fields = statFields(pid);
  return fields ? Number(fields[1]) : undefined;
}

/** `pid` and every descendant, parents before children. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const parent = parentOf(Number(entry));
    if (parent === undefined) continue;
    children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]!) ?? []));
  return tree;
}

export function processInfo(pid: number): ProcessInfo {
  let status = '';
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    // gone
  }
  return {
    pid,
    ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0),
    name: /^Name:\s+(.*)$/m.exec(status)?.[1] ?? '?',
    rssKb: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0),
  };
}

/** Resident memory of a process tree, in MiB, in total and per command name. */
export function treeRss(pid: number): { totalMiB: number; byName: Record<string, number> } {
  const byName: Record<string, number> = {};
  let totalKb = 0;
  for (const info of processTree(pid).map(processInfo)) {
    totalKb += info.rssKb;
    byName[info.name] = (byName[info.name] ?? 0) + info.rssKb / 1024;
  }
  for (const name of Object.keys(byName)) byName[name] = Math.round(byName[name]! * 10) / 10;
  return { totalMiB: totalKb / 1024, byName };
}

/** A process's arguments joined by spaces; '' when it is gone. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** The direct children of `pid` (e.g. the runners an ACIS server spawned). */
export function childrenOf(pid: number): ProcessInfo[] {
  return processTree(pid)
    .slice(1)
    .map(processInfo)
    .filter((info) => info.ppid === pid);
}

/** CPU ms of every process under `roots` now, this process excluded (its polling would count). */
function cpuByPid(roots: number[]): Map<number, number> {
  const snapshot = new Map<number, number>();
  for (const pid of roots.flatMap(processTree)) {
    const ms = pid === process.pid ? undefined : processCpuMs(pid);
    if (ms !== undefined) snapshot.set(pid, ms);
  }
  return snapshot;
}

/**
 * Waits until the trees under `roots` (minus this process, whose polling would count) spent at most
 * `maxCpuMs` CPU in each of `windows` consecutive `windowMs` windows: the runner spawned for the pool
 * has started and gone idle, the agent runtime has written its transcript. Returns the ms they were
 * busy (from the call to the first quiet window), or null when not quiet within `timeoutMs`. Sequential turns measured right after a busy
 * spell would otherwise share the CPUs (two on the reference machine) with it.
 */
export async function waitQuiet(
  roots: number[],
  options: { windowMs?: number; windows?: number; maxCpuMs?: number; timeoutMs?: number } = {},
): Promise<number | null> {
  const { windowMs = 100, windows = 2, maxCpuMs = 10, timeoutMs = 15_000 } = options;
  const started = performance.now();
  let quietWindows = 0;
  let quietSince = started;
  while (performance.now() - started < timeoutMs) {
    if (quietWindows === 0) quietSince = performance.now();
    const before = cpuByPid(roots);
    await sleep(windowMs);
    // A process started meanwhile counts from 0; one that exited counts nothing.
    let spent = 0;
    for (const [pid, ms] of cpuByPid(roots)) spent += ms - (before.get(pid) ?? 0);
    quietWindows = spent <= maxCpuMs ? quietWindows + 1 : 0;
    if (quietWindows >= windows) return quietSince - started;
  }
  return null;
}

/**
 * The share of the machine's CPUs that other work took while the bench measured (between `begin`
 * and `end`, summed over calls): every process outside the tree under `root` and its ancestors,
 * except PostgreSQL backends of the bench's own databases (named `ownDatabasePrefix…`), which serve
 * ACIS. Sequential turns on a shared machine slow down with it. A process of the tree at either end
 * is the bench's. One that started meanwhile counts from 0, unless it is already a zombie (a runner
 * recycled during the turn leaves its processes so, outside the tree); one that exited is missed, so
 * short-lived work of others is under-counted.
 */
export class OtherCpu {
  private otherMs = 0;
  private wallMs = 0;
  private started: Snapshot | undefined;
  private readonly ancestors = new Set<number>();

  constructor(
    private readonly root: number,
    private readonly ownDatabasePrefix = 'acis_bench_',
  ) {
    for (let pid = parentOf(root); pid !== undefined && pid > 1; pid = parentOf(pid)) this.ancestors.add(pid);
  }

  private snapshot(): Snapshot {
    const cpu = new Map<number, { ms: number; zombie: boolean }>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      const command = commandLine(pid);
      if (command.startsWith('postgres:') && command.includes(` ${this.ownDatabasePrefix}`)) continue;
      const ms = processCpuMs(pid);
      const state = statFields(pid)?.[0];
      if (ms !== undefined && state !== undefined) cpu.set(pid, { ms, zombie: state === 'Z' || state === 'X' });
    }
    return { cpu, own: new Set([...processTree(this.root), ...this.ancestors]), wall: performance.now() };
  }

  begin(): void {
    this.started = this.snapshot();
  }

  end(): void {
    const started = this.started;
    if (!started) return;
    const now = this.snapshot();
    for (const [pid, { ms, zombie }] of now.cpu) {
      if (now.own.has(pid) || started.own.has(pid)) continue;
      const before = started.cpu.get(pid);
      if (!before && zombie) continue;
      this.otherMs += ms - (before?.ms ?? 0);
    }
    this.wallMs += now.wall - started.wall;
    this.started = undefined;
  }

  /** null off Linux or before any measurement. */
  share(): number | null {
    if (this.wallMs === 0 || machineCpuMs() === null) return null;
    return Math.max(0, this.otherMs) / (this.wallMs * os.cpus().length);
  }
}

interface Snapshot {
  cpu: Map<number, { ms: number; zombie: boolean }>;
  own: Set<number>;
  wall: number;
}
