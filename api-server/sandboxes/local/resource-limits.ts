/**
 * CPU and memory limits of local runners, through cgroups v2: each runner is started in a transient
 * systemd scope (`systemd-run --scope`) with `MemoryMax`, `MemorySwapMax=0` and `CPUQuota`. Where
 * that cannot work (no systemd manager to ask, cgroups v1 or a hybrid hierarchy, controllers not
 * delegated) nothing bounds a runner's CPU and memory but the machine: the probe at start says why,
 * and the provider logs it. Fail-safe direction: a scope systemd made but whose `memory.max` or
 * `cpu.max` does not read back as asked counts as not enforced, never as enforced.
 */
import { execFile } from 'node:child_process';

const PROBE_TIMEOUT_MS = 10_000;
/** cgroup v2's default CPU period, the unit of `cpu.max`'s quota. */
const CPU_PERIOD_US = 100_000;

export interface RunnerLimits {
  /** CPUs a runner may use (fractions allowed). */
  cpus: number;
  memoryBytes: number;
}

export type LimitEnforcement =
  | { enforced: true; wrap: (command: { file: string; args: string[] }) => { file: string; args: string[] } }
  | { enforced: false; reason: string };

/** `command` in a transient scope with the limits; `--user` asks the user's manager (a non-root server). */
export function scopeCommand(
  limits: RunnerLimits,
  asUser: boolean,
  command: { file: string; args: string[] },
): { file: string; args: string[] } {
  return {
    file: 'systemd-run',
    args: [
      ...(asUser ? ['--user'] : []),
      '--scope',
      '--quiet',
      '--collect',
      '-p',
      `MemoryMax=${limits.memoryBytes}`,
      '-p',
      'MemorySwapMax=0',
      '-p',
      `CPUQuota=${cpuQuotaPercent(limits.cpus)}%`,
      '--',
      command.file,
      ...command.args,
    ],
  };
}

/** What `memory.max` and `cpu.max` of a scope with `limits` read. */
export function expectedCgroupFiles(limits: RunnerLimits): { memoryMax: string; cpuMax: string } {
  return {
    memoryMax: String(limits.memoryBytes),
    cpuMax: `${Math.round((cpuQuotaPercent(limits.cpus) / 100) * CPU_PERIOD_US)} ${CPU_PERIOD_US}`,
  };
}

function cpuQuotaPercent(cpus: number): number {
  return Math.max(1, Math.round(cpus * 100));
}

// Inside the scope: the cgroup v2 path of this very process, then its two limit files.
const READ_BACK = 'g=$(sed -n "s/^0:://p" /proc/self/cgroup); cat "/sys/fs/cgroup$g/memory.max" "/sys/fs/cgroup$g/cpu.max"';

/** Starts a scope with the limits around a shell that reads them back; enforced only if they read as asked. */
export async function probeLimitEnforcement(limits: RunnerLimits, asUser = process.getuid?.() !== 0): Promise<LimitEnforcement> {
  const probe = scopeCommand(limits, asUser, { file: '/bin/sh', args: ['-c', READ_BACK] });
  const outcome = await new Promise<{ ok: boolean; text: string }>((resolve) => {
    execFile(probe.file, probe.args, { timeout: PROBE_TIMEOUT_MS, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = (error as NodeJS.ErrnoException | null)?.code;
      if (code === 'ENOENT') resolve({ ok: false, text: 'systemd-run is not installed' });
      else if (error)
        resolve({ ok: false, text: `systemd-run failed: ${(stderr.trim() || error.message).split('\n').slice(-2).join(' ')}` });
      else resolve({ ok: true, text: stdout.trim() });
    });
  });
  if (!outcome.ok) return { enforced: false, reason: outcome.text };
  const expected = expectedCgroupFiles(limits);
  const [memoryMax, cpuMax] = outcome.text.split('\n').map((line) => line.trim());
  if (memoryMax !== expected.memoryMax || cpuMax !== expected.cpuMax) {
    return {
      enforced: false,
      reason: `a systemd scope's cgroup reads memory.max=${memoryMax ?? '?'}, cpu.max=${cpuMax ?? '?'} (cgroups v2 with the memory and cpu controllers delegated are needed)`,
    };
  }
  return { enforced: true, wrap: (command) => scopeCommand(limits, asUser, command) };
}
