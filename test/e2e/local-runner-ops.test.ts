/**
 * The runner operations the kubernetes provider relies on, under the local provider: skills delivered
 * over stdio and written by the runner inside its bubblewrap sandbox, and the workspace packed by one
 * sandboxed runner and unpacked by another (the sandbox's own `tar`); and when the pool replaces a
 * runner a message claimed.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api-server/config.js';
import { LocalSandboxProvider } from '../../api-server/sandboxes/local/provider.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';

let stub: ModelStub;
let dataDir: string;
let provider: LocalSandboxProvider;
beforeAll(async () => {
  stub = await startModelStub();
  dataDir = await mkdtemp(path.join(tmpdir(), 'acis-local-runner-ops-'));
  const config = loadConfig({ ACIS_DATA_DIR: dataDir, ANTHROPIC_BASE_URL: stub.url, ACIS_POOL_SIZE: '0', ACIS_MAX_SANDBOXES: '2' });
  provider = new LocalSandboxProvider(config, pino({ level: 'silent' }), async () => undefined);
  await provider.start();
  expect(provider.unavailableReason).toBeUndefined();
});
afterAll(async () => {
  await provider?.stop();
  await stub?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

const request = (conversationId: string) => ({ agentType: 'vendor-agent-sdk', conversationId, tenantId: 'ten_ops' });

describe('Runner operations on a LocalRunner in bubblewrap', () => {
  it('writes delivered skills into the workspace, exports it, and another runner imports it', async () => {
    const lease = await provider.acquire(request('conv_ops_a'), { wait: false });
    await lease.runner.deliverSkills([
      {
        name: 'heron',
        files: [{ path: 'SKILL.md', data: Buffer.from('---\nname: heron\ndescription: Herons.\n---\n'), executable: false }],
      },
    ]);
    const archive = await lease.runner.exportWorkspace();
    await provider.release(lease, { discard: true });

    const other = await provider.acquire(request('conv_ops_b'), { wait: false });
    await other.runner.importWorkspace(archive);
    await provider.release(other, {});
    // conv_ops_b's workspace, saved on release, holds what the first runner packed.
    const saved = path.join(dataDir, 'conversations', 'conv_ops_b', 'workspace', '.claude', 'skills', 'heron', 'SKILL.md');
    expect(await readFile(saved, 'utf8')).toContain('name: heron');
  });
});

describe('the pool of a LocalSandboxProvider', () => {
  it("starts the replacement of a claimed runner only once that runner's agent has spoken, not during its first line", async () => {
    const poolDir = await mkdtemp(path.join(tmpdir(), 'acis-local-pool-'));
    const config = loadConfig({
      ACIS_DATA_DIR: poolDir,
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_POOL_SIZE: '1',
      ACIS_MAX_SANDBOXES: '3',
      ACIS_POOL_PREWARM: '0',
    });
    const pool = new LocalSandboxProvider(config, pino({ level: 'silent' }), async () => undefined);
    try {
      await pool.start();
      const states = () =>
        pool
          .views()
          .map((view) => view.state)
          .sort();
      await until('the pool runner to be up', () => states().join() === 'pooled');
      const lease = await pool.acquire(request('conv_pool_a'), { wait: false });
      expect(states()).toEqual(['busy']);
      let atFirstEvent: string[] | undefined;
      const outcome = await lease.runner.runTurn({ content: '[[reply: hello]]' }, () => {
        atFirstEvent ??= states();
      });
      expect(outcome).toEqual({ kind: 'result' });
      expect(atFirstEvent).toEqual(['busy']);
      // The agent spoke: the replacement is on its way while the turn is still the runner's.
      expect(states()).toEqual(['busy', 'starting']);
      await pool.release(lease, { discard: true });
      await until('the pool to be topped up again', () => states().join() === 'pooled');
    } finally {
      await pool.stop();
      await rm(poolDir, { recursive: true, force: true });
    }
  });
});

async function until(what: string, probe: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
