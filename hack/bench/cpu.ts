import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * CPU time read from /proc (Linux; elsewhere every reading is null). Throughput on a small,
 * shared machine moves with whatever else runs on it; CPU time per request does much less, so the
 * report carries both, plus the CPU that unrelated processes took during each scenario, which says
 * how far to trust its throughput.
 */
const TICKS_PER_SECOND = clockTicks();

function clockTicks(): number | null {
  try {
    readFileSync('/proc/self/stat');
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return null;
  }
}

/** utime + stime of one process, in ms; undefined when it is gone (or off Linux). */
export function processCpuMs(pid: number): number | undefined {
  if (TICKS_PER_SECOND === null) return undefined;
  try {
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND!;
  } catch {
    return undefined;
  }
}

/** CPU ms of each pid now. */
export function cpuSnapshot(pids: number[]): Map<number, number> | null {
  if (TICKS_PER_SECOND === null) return null;
  const snapshot = new Map<number, number>();
  for (const pid of pids) {
    const ms = processCpuMs(pid);
    if (ms !== undefined) snapshot.set(pid, ms);
  }
  return snapshot;
}

/** CPU ms spent between two snapshots; a pid absent from `before` started in between (counted from 0). */
export function cpuSpentMs(before: Map<number, number> | null, after: Map<number, number> | null): number | null {
  if (!before || !after) return null;
  let spent = 0;
  for (const [pid, ms] of after) spent += ms - (before.get(pid) ?? 0);
  return spent;
}

/** CPU ms all processes of the machine have spent since boot (busy = not idle, not iowait). */
export function machineCpuMs(): number | null {
  if (TICKS_PER_SECOND === null) return null;
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const busy = ticks.reduce((a, b) => a + b, 0) - (ticks[3] ?? 0) - (ticks[4] ?? 0);
  return (busy * 1000) / TICKS_PER_SECOND;
}

/** Share (0..1) of all CPUs busy over the next `ms`; null off Linux. */
export async function machineBusyShare(ms: number): Promise<number | null> {
  const start = machineCpuMs();
  await sleep(ms);
  const end = machineCpuMs();
  return start === null || end === null ? null : (end - start) / (ms * os.cpus().length);
}
