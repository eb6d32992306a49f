import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { KubernetesSandboxProvider } from '../../api-server/sandboxes/kubernetes/provider.js';
import type { RunnerRecords } from '../../api-server/sandboxes/kubernetes/records.js';
import type { SandboxClient } from '../../api-server/sandboxes/kubernetes/sandboxes.js';

/** Records another replica wrote: runner `run_other` stands for `msg_other` with token `tok`. */
const records: RunnerRecords = {
  bindEgress: async () => undefined,
  clearEgress: async () => undefined,
  egressRun: async (runnerId, token) => (runnerId === 'run_other' && token === 'tok' ? 'msg_other' : undefined),
  runOf: async (runnerId) => (runnerId === 'run_other' ? 'msg_other' : undefined),
  saveWorkspace: async () => undefined,
  loadWorkspace: async () => undefined,
};

/** A provider never started: only its egress credentials are asked for (no runner of its own). */
function provider(withRecords: boolean): KubernetesSandboxProvider {
  return new KubernetesSandboxProvider({
    client: {} as SandboxClient,
    connect: () => Promise.reject(new Error('not connected in this test')),
    logger: pino({ level: 'silent' }),
    onSandboxState: async () => undefined,
    readyTimeoutMs: 1_000,
    ...(withRecords && { records }),
  });
}

describe('KubernetesSandboxProvider.egressCredentials(abort)', () => {
  it.each([
    ['another replica’s runner, by the shared records', true, 'run_other', 'tok', 'msg_other'],
    ['a wrong token in the records', true, 'run_other', 'nope', undefined],
    ['a runner nobody recorded', true, 'run_unknown', 'tok', undefined],
    ['without records: only its own runners', false, 'run_other', 'tok', undefined],
  ])('egressRun: %s', async (_name, withRecords, runnerId, token, expected) => {
    const credentials = provider(withRecords).egressCredentials({ here: () => undefined });
    expect(await credentials.egressRun(runnerId, token)).toBe(expected);
  });

  it.each([
    ['ends another replica’s run through `elsewhere`', true, 'run_other', [['elsewhere', 'msg_other', 'API_KEY']]],
    ['ends nothing for a runner nobody recorded', true, 'run_unknown', []],
    ['ends nothing without records', false, 'run_other', []],
  ])('abortMissing %s', async (_name, withRecords, runnerId, expected) => {
    const ended: string[][] = [];
    const credentials = provider(withRecords).egressCredentials({
      here: (runId, alias) => void ended.push(['here', runId, alias]),
      elsewhere: async (runId, alias) => void ended.push(['elsewhere', runId, alias]),
    });
    await credentials.abortMissing(runnerId, 'API_KEY');
    expect(ended).toEqual(expected);
  });
});
