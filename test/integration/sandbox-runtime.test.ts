/**
 * A node that cannot start sandboxed runners (no bubblewrap, or one that cannot create namespaces)
 * says so at start, answers /readyz 503 with the reason, and fails every message at once with a
 * `failed` message and an `error` line naming what is missing and how to install it.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, sandboxWeakenings } from '../../api-server/config.js';
import { checkSandboxRuntime } from '../../api-server/sandboxes/local/sandbox-runtime.js';
import { isTerminal, parseNdjson, withoutPings } from '../helpers/ndjson.js';
import { provisionUser } from '../helpers/provision.js';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'acis-sandbox-runtime-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('checkSandboxRuntime', () => {
  it('finds bubblewrap on PATH and starts a runner sandbox with it', async () => {
    const runtime = await checkSandboxRuntime('bwrap', path.join(scratch, 'probe-ok'));
    expect(runtime).toEqual({ ok: true, bwrapPath: expect.stringMatching(/\/bwrap$/) });
  });

  it('names the missing binary and how to install it when PATH has no bubblewrap', async () => {
    const runtime = await checkSandboxRuntime('bwrap', path.join(scratch, 'probe-path'), path.join(scratch, 'empty-bin'));
    expect(runtime.ok).toBe(false);
    if (runtime.ok) return;
    expect(runtime.reason).toContain('no executable bubblewrap (bwrap) on PATH');
    expect(runtime.reason).toContain('apt-get install bubblewrap');
    expect(runtime.reason).toContain('ACIS_BWRAP_PATH');
  });

  it('says that user namespaces must be allowed when bubblewrap cannot create them', async () => {
    // Stands for a bwrap on a host that forbids unprivileged user namespaces: it fails as that one does.
    const refusing = path.join(scratch, 'refusing-bwrap');
    await writeFile(refusing, '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n');
    await chmod(refusing, 0o755);
    const runtime = await checkSandboxRuntime(refusing, path.join(scratch, 'probe-userns'));
    expect(runtime.ok).toBe(false);
    if (runtime.ok) return;
    expect(runtime.reason).toContain(`${refusing} failed to create a runner's sandbox (bwrap: No permissions to create new namespace)`);
    expect(runtime.reason).toContain('Unprivileged user namespaces must be allowed');
  });
});

describe('a node without a sandbox runtime', () => {
  let t: TestServer;
  let key: string;
  let userId: string;
  const missing = '/nonexistent/acis-test/bwrap';

  beforeAll(async () => {
    t = await startTestServer({ ACIS_BWRAP_PATH: missing, ACIS_POOL_SIZE: '1' });
    ({ serviceKey: key } = await t.createIntegration('no sandbox runtime'));
    ({ userId } = await provisionUser(t, key, { settings: { filler_enabled: false } }));
  });
  afterAll(async () => {
    await t?.stop();
  });

  async function newConversation(): Promise<string> {
    const res = await t.request('POST', '/conversations', { token: key, body: { user_id: userId } });
    expect(res.status, res.text).toBe(201);
    return res.body.id;
  }

  it('logs what is missing at start and is not ready, saying why', async () => {
    const logged = t.logs.map((line) => JSON.parse(line)).find((line) => line.msg?.startsWith('agent runners cannot start'));
    expect(logged).toMatchObject({ level: 50, reason: expect.stringContaining(`no executable bubblewrap (${missing}) at ${missing}`) });
    expect(logged.reason).toContain('apt-get install bubblewrap');
    const ready = await t.request('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.headers.get('content-type')).toContain('application/problem+json');
    expect(problemSlug(ready)).toBe('sandbox-unavailable');
    expect(ready.body.detail).toContain('apt-get install bubblewrap');
    expect((await t.request('GET', '/healthz')).status).toBe(200);
    // Nothing tries to pre-start runners it cannot start.
    expect(t.server.deps.runtime.provider.views()).toEqual([]);
  });

  it('fails a streamed message at once with message_end (failed) and an error line that says how to install bubblewrap', async () => {
    const conversationId = await newConversation();
    const started = Date.now();
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, { token: key, body: { content: '[[reply: hi]]' } });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(res.status, res.text).toBe(200);
    const lines = withoutPings(parseNdjson(res.text));
    expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed', content: '' } });
    const terminal = lines.at(-1)!;
    expect(isTerminal(terminal)).toBe(true);
    expect(terminal).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 503, title: 'Sandbox runtime unavailable' },
    });
    expect(terminal.problem.type).toMatch(/\/problems\/sandbox-unavailable$/);
    expect(terminal.problem.detail).toContain('apt-get install bubblewrap');

    const history = await t.request('GET', `/conversations/${conversationId}/messages`, { token: key });
    expect(history.body.data.map((m: any) => [m.role, m.status])).toEqual([
      ['assistant', 'failed'],
      ['user', 'completed'],
    ]);
    // The conversation is free for the next message (which fails the same way).
    const replay = await t.request(
      'GET',
      `/conversations/${conversationId}/messages/${res.headers.get('x-service-message-id')}/stream?after=0`,
      { token: key },
    );
    expect(parseNdjson(replay.text).at(-1)).toMatchObject({ type: 'error', problem: { detail: terminal.problem.detail } });
  });

  it('answers 503 sandbox-unavailable at once for stream=false and with on_capacity=hold', async () => {
    const conversationId = await newConversation();
    const plain = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: 'hello' },
    });
    expect(plain.status, plain.text).toBe(503);
    expect(problemSlug(plain)).toBe('sandbox-unavailable');
    expect(plain.body.detail).toContain('bubblewrap');
    const held = await t.request('POST', `/conversations/${conversationId}/messages?on_capacity=hold&stream=false`, {
      token: key,
      body: { content: 'again' },
    });
    expect(held.status, held.text).toBe(503);
    expect(problemSlug(held)).toBe('sandbox-unavailable');
  });
});

describe('a node whose settings weaken the sandbox', () => {
  it('says so in a warning at start and in /readyz, naming each setting; a default node says nothing', async () => {
    const t = await startTestServer({ ACIS_SANDBOX_ISOLATION: 'none', ACIS_ALLOW_FILE_REPOS: '1', ACIS_POOL_SIZE: '0' });
    try {
      const warning = t.logs.map((line) => JSON.parse(line)).find((line) => line.msg?.startsWith('THE SANDBOX IS WEAKENED'));
      expect(warning).toMatchObject({ level: 40 });
      expect(warning.weakenings).toEqual([
        expect.stringMatching(/^ACIS_SANDBOX_ISOLATION=none: /),
        expect.stringMatching(/^ACIS_ALLOW_FILE_REPOS=1: /),
      ]);
      const ready = await t.request('GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready', sandbox_weakened_by: warning.weakenings });
    } finally {
      await t.stop();
    }
    expect(sandboxWeakenings(loadConfig({}))).toEqual([]);
    expect(sandboxWeakenings(loadConfig({ ACIS_SANDBOX_PROVIDER: 'kubernetes', ACIS_SANDBOX_ISOLATION: 'none' }))).toEqual([]);
    // Runner pods' DNS is off unless the deployment turns it on, which is said.
    expect(sandboxWeakenings(loadConfig({ ACIS_SANDBOX_PROVIDER: 'kubernetes' }))).toEqual([]);
    expect(sandboxWeakenings(loadConfig({ ACIS_SANDBOX_PROVIDER: 'kubernetes', ACIS_SANDBOX_DNS: '1' }))).toEqual([
      expect.stringMatching(/^ACIS_SANDBOX_DNS=1: runner pods may query the cluster DNS/),
    ]);
  });
});
