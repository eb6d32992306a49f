import { describe, expect, it } from 'vitest';
import { expectedCgroupFiles, probeLimitEnforcement, scopeCommand } from '../../api-server/sandboxes/local/resource-limits.js';

const GiB = 1024 ** 3;

describe('scopeCommand(limits, asUser, command)', () => {
  it('starts the command in a transient scope with memory (no swap) and CPU bounds', () => {
    expect(
      scopeCommand({ cpus: 1.5, memoryBytes: 2 * GiB }, false, { file: '/usr/bin/bwrap', args: ['--die-with-parent', 'node'] }),
    ).toEqual({
      file: 'systemd-run',
      args: [
        '--scope',
        '--quiet',
        '--collect',
        '-p',
        `MemoryMax=${2 * GiB}`,
        '-p',
        'MemorySwapMax=0',
        '-p',
        'CPUQuota=150%',
        '--',
        '/usr/bin/bwrap',
        '--die-with-parent',
        'node',
      ],
    });
  });

  it("asks the user's manager for a server that is not root", () => {
    expect(scopeCommand({ cpus: 2, memoryBytes: GiB }, true, { file: 'x', args: [] }).args.slice(0, 2)).toEqual(['--user', '--scope']);
  });
});

describe('expectedCgroupFiles(limits)', () => {
  it.each([
    [
      { cpus: 2, memoryBytes: GiB },
      { memoryMax: String(GiB), cpuMax: '200000 100000' },
    ],
    [
      { cpus: 0.5, memoryBytes: 64 * 1024 ** 2 },
      { memoryMax: String(64 * 1024 ** 2), cpuMax: '50000 100000' },
    ],
    [
      { cpus: 0.001, memoryBytes: GiB },
      { memoryMax: String(GiB), cpuMax: '1000 100000' },
    ],
  ])('%j reads back as %j', (limits, files) => {
    expect(expectedCgroupFiles(limits)).toEqual(files);
  });
});

describe('probeLimitEnforcement(limits)', () => {
  it('on this machine either reads the limits back from a real scope or says why not', async () => {
    const outcome = await probeLimitEnforcement({ cpus: 1, memoryBytes: GiB });
    if (outcome.enforced) expect(outcome.wrap({ file: 'true', args: [] }).file).toBe('systemd-run');
    else expect(outcome.reason).toMatch(/systemd-run|cgroup/);
  });
});
