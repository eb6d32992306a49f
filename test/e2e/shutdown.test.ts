/**
 * Graceful shutdown of `acis serve` (a separate process, from source) on SIGTERM, with the real Agent
 * SDK in bubblewrap runners against the model stub: a turn in progress at the signal completes; one
 * still going at the deadline ends `failed` with an `error` line that a re-attach on another server
 * of the same database returns; new messages get 503 `shutting-down`; no runner outlives the
 * process. A second SIGTERM exits at once. The in-process test server is that other server.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { type AcisProcess, cleanEnv, killLeftovers, processes, type ServingAcis, serveAcis } from '../helpers/acis-process.js';
import { isTerminal, type Line, parseNdjson, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { createTestDatabase, dropTestDatabase, startTestServer, type TestServer } from '../helpers/test-server.js';

const MASTER_KEY = randomBytes(32).toString('base64');
const GRACE_SECONDS = 6;

let stub: ModelStub;
let databaseUrl: string;
let other: TestServer;
let key: string;
let user: ProvisionedUser;
const dataDirs: string[] = [];

beforeAll(async () => {
  stub = await startModelStub();
  databaseUrl = await createTestDatabase();
  other = await startTestServer({ DATABASE_URL: databaseUrl, ACIS_MASTER_KEY: MASTER_KEY, ANTHROPIC_BASE_URL: stub.url });
  ({ serviceKey: key } = await other.createIntegration('shutdown'));
  user = await provisionUser(other, key, { settings: { filler_enabled: false } });
}, 120_000);

afterAll(async () => {
  killLeftovers();
  await other?.stop();
  await stub?.stop();
  for (const dir of dataDirs) await rm(dir, { recursive: true, force: true });
  // Made here and shared by both servers, so neither drops it on its own.
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

/** `acis serve` on the shared database, logging at info so the test sees when its shutdown begins. */
async function startServing(graceSeconds: number): Promise<ServingAcis & { dataDir: string }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'acis-shutdown-'));
  dataDirs.push(dataDir);
  const served = await serveAcis(
    cleanEnv({
      DATABASE_URL: databaseUrl,
      ACIS_DATA_DIR: dataDir,
      ACIS_MASTER_KEY: MASTER_KEY,
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_POOL_SIZE: '0',
      ACIS_SHUTDOWN_GRACE_SECONDS: String(graceSeconds),
      LOG_LEVEL: 'info',
    }),
  );
  return { ...served, dataDir };
}

/** Resolves once the process has written `text` (to stdout or stderr). */
function written(child: AcisProcess, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!child.output().includes(text)) return;
      child.process.stdout?.off('data', check);
      child.process.stderr?.off('data', check);
      resolve();
    };
    // Listeners added after the helper's own, so output() already holds the chunk.
    child.process.stdout?.on('data', check);
    child.process.stderr?.on('data', check);
    check();
  });
}

async function newConversation(): Promise<string> {
  const res = await other.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

const isTextDelta = (line: Line) => line.type === 'stream_event' && line.event?.type === 'content_block_delta';

/** Streams a message on `server`; `firstDelta` resolves once the agent's text is coming (the turn is at the model). */
async function streamMessage(server: ServingAcis, content: string) {
  const conversationId = await newConversation();
  const response = await fetch(`${server.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content }),
  });
  expect(response.status).toBe(200);
  let markStarted: () => void = () => {};
  const firstDelta = new Promise<void>((resolve) => (markStarted = resolve));
  let ended = false;
  const lines = readLines(response, (line) => {
    if (isTextDelta(line)) markStarted();
    if (isTerminal(line)) ended = true;
  });
  return { conversationId, messageId: response.headers.get('x-service-message-id')!, firstDelta, lines, ended: () => ended };
}

/** The processes started for the server with this data dir (its runners' bwrap command lines name it). */
async function runnersOf(dataDir: string) {
  return (await processes()).filter((info) => info.commandLine.includes(dataDir));
}

const words = (count: number) => Array.from({ length: count }, (_, i) => `word${i}`).join(' ');

describe('acis serve on SIGTERM', () => {
  it('lets a turn in progress finish, ends one past the deadline failed with a stored error line, and leaves no runner behind', async () => {
    const server = await startServing(GRACE_SECONDS);
    // 20 deltas a second apart: far past the deadline. Then 3 deltas 0.8 s apart: done well within it.
    const long = await streamMessage(server, `[[slow: 1000]] [[reply: ${words(60)}]]`);
    await long.firstDelta;
    const short = await streamMessage(server, `[[slow: 800]] [[reply: ${words(9)}]]`);
    await short.firstDelta;
    expect((await runnersOf(server.dataDir)).length).toBeGreaterThan(0);

    const signalled = Date.now();
    const beginning = written(server, 'shutting down');
    server.process.kill('SIGTERM');
    await beginning;
    // Both turns were in progress when the signal came.
    expect(short.ended()).toBe(false);
    expect(long.ended()).toBe(false);

    // No new messages; not ready. Other requests are still served while runs finish.
    const refused = await fetch(`${server.url}/conversations/${await newConversation()}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: '[[reply: too late]]' }),
    });
    const refusedBody = (await refused.json()) as { type: string };
    expect(refused.status, JSON.stringify(refusedBody)).toBe(503);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refusedBody.type).toMatch(/\/problems\/shutting-down$/);
    const ready = await fetch(`${server.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { type: string }).type).toMatch(/\/problems\/shutting-down$/);

    const shortLines = withoutPings(await short.lines);
    expect(shortLines.map((l) => l.type).slice(-2)).toEqual(['message_end', 'result']);
    expect(shortLines.at(-2)!.message).toMatchObject({ status: 'completed', content: words(9) });

    const longLines = withoutPings(await long.lines);
    expect(longLines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed' } });
    const errorLine = longLines.at(-1)!;
    expect(errorLine).toMatchObject({ object: 'platform.event', type: 'error', problem: { status: 503 } });
    expect(errorLine.problem.type).toMatch(/\/problems\/shutting-down$/);
    expect(errorLine.problem.detail).toContain(`it waited ${GRACE_SECONDS} s`);

    expect(await server.exited).toBe(0);
    const took = Date.now() - signalled;
    expect(took).toBeGreaterThanOrEqual(GRACE_SECONDS * 1000);
    expect(took).toBeLessThan((GRACE_SECONDS + 15) * 1000);
    expect(await runnersOf(server.dataDir)).toEqual([]);

    // The other server replays the ended run, error line included, from the database.
    const replay = await other.request('GET', `/conversations/${long.conversationId}/messages/${long.messageId}/stream?after=0`, {
      token: key,
    });
    expect(replay.status).toBe(200);
    const replayed = withoutPings(parseNdjson(replay.text));
    expect(replayed.at(-1)).toMatchObject({ type: 'error', problem: { detail: errorLine.problem.detail } });
    expect(replayed.at(-2)).toMatchObject({ type: 'message_end', message: { id: long.messageId, status: 'failed' } });
    const history = await other.request('GET', `/conversations/${short.conversationId}/messages`, { token: key });
    expect(history.body.data[0]).toMatchObject({ id: short.messageId, status: 'completed' });
    expect((await other.request('GET', '/readyz')).status).toBe(200);
  }, 90_000);

  it('exits at once on a second SIGTERM, taking its runners with it', async () => {
    const server = await startServing(300);
    const turn = await streamMessage(server, `[[slow: 1000]] [[reply: ${words(60)}]]`);
    // The stream is cut when the process exits.
    const cut = turn.lines.then(
      () => false,
      () => true,
    );
    await turn.firstDelta;
    expect((await runnersOf(server.dataDir)).length).toBeGreaterThan(0);
    const beginning = written(server, 'shutting down');
    server.process.kill('SIGTERM');
    await beginning;
    const signalled = Date.now();
    server.process.kill('SIGTERM');
    expect(await server.exited).toBe(143);
    expect(Date.now() - signalled).toBeLessThan(5_000);
    expect(await cut).toBe(true);
    // The runners die with the server (bwrap --die-with-parent); the kernel reaps them right after.
    while ((await runnersOf(server.dataDir)).length > 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }, 60_000);

  it('takes a SIGINT right after the first for the same Ctrl-C relayed (npm start), and shuts down gracefully', async () => {
    const server = await startServing(300);
    server.process.kill('SIGINT');
    server.process.kill('SIGINT');
    expect(await server.exited).toBe(0);
    expect(server.output()).not.toContain('exiting at once');
  }, 60_000);
});

describe('a requested shutdown', () => {
  it('logs no error when it stops a pool runner that is still starting', async () => {
    const server = await startTestServer({ ANTHROPIC_BASE_URL: stub.url, ACIS_POOL_SIZE: '1' });
    let stopped = false;
    try {
      expect(server.server.deps.runtime.provider.views().map((view) => view.state)).toEqual(['starting']);
      await server.stop();
      stopped = true;
      const errors = server.logs.map((line) => JSON.parse(line)).filter((line) => line.level >= 50);
      expect(errors).toEqual([]);
    } finally {
      if (!stopped) await server.stop();
    }
  });
});
