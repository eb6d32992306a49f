/**
 * The runner operations the kubernetes provider relies on, under the local provider: skills delivered
 * over stdio and written by the runner inside its bubblewrap sandbox, and the workspace packed by one
 * sandboxed runner and unpacked by another (the sandbox's own `tar`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api-server/config.js';
import { LocalSandboxProvider } from '../../api-server/sandboxes/local-provider.js';
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
      { name: 'heron', files: [{ path: 'SKILL.md', data: Buffer.from('---\nname: heron\ndescription: Herons.\n---\n'), executable: false }] },
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
