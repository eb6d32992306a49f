/**
 * An API replica killed (SIGKILL) while it hosts a streaming run, local provider: two API server
 * processes on one database. Node A runs in the test process and survives; node B is `acis serve`
 * in its own process, hosts the run and is killed at several points of the turn. Whatever the
 * client received from B is stored with the same numbers (a line reaches a client only once it is
 * stored), A notices within seconds that B stopped renewing its liveness row, and the run ends
 * `failed` (its runner died with B) with `message_end` and the terminal `error` line, which a client
 * re-attaching on A with the count it had receives: every line once.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { cleanEnv, killLeftovers, type ServingAcis, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { createTestDatabase, dropTestDatabase, startTestServer, type TestServer } from '../helpers/test-server.js';

const MASTER_KEY = randomBytes(32).toString('base64');
/** Node A's view: B is gone once its row is this old (the default is 10 s; short here to keep the file quick). */
const STALE_SECONDS = 2;
const LIVENESS = { ACIS_NODE_HEARTBEAT_SECONDS: '0.5', ACIS_NODE_STALE_SECONDS: String(STALE_SECONDS) };
/** Twelve text deltas of three words, 150 ms apart: a turn in progress for about two seconds. */
const SLOW_TURN = `[[slow: 150]] [[reply: ${Array.from({ length: 36 }, (_, i) => `w${i + 1}`).join(' ')}]]`;

let stub: ModelStub;
let nodeA: TestServer;
let nodeB: ServingAcis | undefined;
let nodeBDataDir: string;
let databaseUrl: string;
let key: string;
let user: ProvisionedUser;

/** Node B (started again after a test killed it): `acis serve` from source on the shared database. */
async function liveNodeB(): Promise<ServingAcis> {
  nodeB ??= await serveAcis(
    cleanEnv({
      DATABASE_URL: databaseUrl,
      ACIS_DATA_DIR: nodeBDataDir,
      ACIS_MASTER_KEY: MASTER_KEY,
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_POOL_SIZE: '0',
      ...LIVENESS,
    }),
  );
  return nodeB;
}

beforeAll(async () => {
  stub = await startModelStub();
  databaseUrl = await createTestDatabase();
  nodeA = await startTestServer({ DATABASE_URL: databaseUrl, ACIS_MASTER_KEY: MASTER_KEY, ANTHROPIC_BASE_URL: stub.url, ...LIVENESS });
  nodeBDataDir = await mkdtemp(path.join(tmpdir(), 'acis-node-b-'));
  await liveNodeB();
  ({ serviceKey: key } = await nodeA.createIntegration('replica crash'));
  user = await provisionUser(nodeA, key, { settings: { filler_enabled: false } });
}, 120_000);

afterAll(async () => {
  if (nodeB) await stopAcis(nodeB);
  killLeftovers();
  await nodeA?.stop();
  await stub?.stop();
  if (nodeBDataDir) await rm(nodeBDataDir, { recursive: true, force: true });
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

const isDelta = (line: Line) => line.type === 'stream_event' && line.event?.type === 'content_block_delta';

/**
 * Sends the slow turn to node B and kills B (SIGKILL) once `killAfter` says so, or (without it) as
 * soon as the run's messages are stored, before its first line. Resolves with every line the client
 * received before its stream broke, the message, and when B was killed.
 */
async function killBDuringTurn(killAfter?: (line: Line) => boolean) {
  const b = await liveNodeB();
  const conversation = await nodeA.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
  expect(conversation.status).toBe(201);
  const conversationId = conversation.body.id as string;
  let killedAt = 0;
  const kill = () => {
    if (killedAt) return;
    killedAt = Date.now();
    b.process.kill('SIGKILL');
    nodeB = undefined;
  };
  const sent = fetch(`${b.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content: SLOW_TURN }),
  });
  const received: Line[] = [];
  if (killAfter) {
    const response = await sent;
    expect(response.status).toBe(200);
    await readLines(response, (line) => {
      received.push(line);
      if (killAfter(line)) kill();
    }).catch(() => undefined); // the connection breaks with B
  } else {
    // The stream's headers go out with its first line, so the stored message is the sign the run began.
    await inProgressMessage(conversationId);
    kill();
    await sent.then((response) => readLines(response, (line) => received.push(line))).catch(() => undefined);
  }
  await b.exited;
  return { conversationId, messageId: (await inProgressMessageId(conversationId))!, received: withoutPings(received), killedAt };
}

/** The conversation's assistant message, once it is stored. */
async function inProgressMessage(conversationId: string): Promise<void> {
  while ((await inProgressMessageId(conversationId)) === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
}

async function inProgressMessageId(conversationId: string): Promise<string | undefined> {
  const row = await nodeA.server.deps.db
    .selectFrom('messages')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .where('role', '=', 'assistant')
    .executeTakeFirst();
  return row?.id;
}

/** The run's lines as stored, numbered. */
async function storedLines(messageId: string): Promise<Array<{ seq: number; line: unknown }>> {
  return nodeA.server.deps.db.selectFrom('run_lines').select(['seq', 'line']).where('message_id', '=', messageId).orderBy('seq').execute();
}

/** Re-attaches on node A with the count the client had; resolves with the lines once the stream ends. */
async function reattachOnA(run: { conversationId: string; messageId: string }, after: number): Promise<Line[]> {
  const response = await fetch(`${nodeA.url}/conversations/${run.conversationId}/messages/${run.messageId}/stream?after=${after}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(response.status).toBe(200);
  return withoutPings(await readLines(response));
}

/** What every kill point must show: the client's lines stored as numbered, and the rest from A ending failed within seconds. */
async function expectFailedOnA(run: Awaited<ReturnType<typeof killBDuringTurn>>) {
  // Checked at once, before any other node could add a line: what the client saw was stored, with its numbers.
  const stored = await storedLines(run.messageId);
  expect(stored.slice(0, run.received.length)).toEqual(run.received.map((line, i) => ({ seq: i + 1, line })));

  const rest = await reattachOnA(run, run.received.length);
  const endedAfterMs = Date.now() - run.killedAt;
  expect(rest.slice(-2).map((line) => line.type)).toEqual(['message_end', 'error']);
  expect(rest.at(-1)!.problem).toMatchObject({ status: 500 });
  expect(rest.at(-2)!.message).toMatchObject({ id: run.messageId, status: 'failed' });
  // B stopped renewing its row: A takes it for gone STALE_SECONDS later, at its next beat.
  expect(endedAfterMs).toBeLessThan((STALE_SECONDS + 3) * 1000);
  // Every line once, in order: the client's lines and the re-attached rest are exactly the stored run.
  const replay = await reattachOnA(run, 0);
  expect([...run.received, ...rest]).toEqual(replay);
  expect(replay.filter((line) => line.type === 'error' || line.type === 'result')).toHaveLength(1);
  const message = await nodeA.request('GET', `/conversations/${run.conversationId}/messages`, { token: key });
  expect(message.body.data[0]).toMatchObject({ id: run.messageId, status: 'failed' });
}

describe('a replica killed while it hosts a run (local provider)', () => {
  it('mid-stream: every line the client had is stored as numbered; the run ends failed within seconds', async () => {
    let deltas = 0;
    const run = await killBDuringTurn((line) => isDelta(line) && ++deltas === 4);
    expect(run.received.filter(isDelta).length).toBeGreaterThanOrEqual(4);
    await expectFailedOnA(run);
  }, 60_000);

  it('before the first line: the re-attached stream is message_end and the error line', async () => {
    const run = await killBDuringTurn();
    expect(run.received).toEqual([]);
    await expectFailedOnA(run);
  }, 60_000);

  it('right before the terminal line: the run still ends failed, with one terminal line', async () => {
    const run = await killBDuringTurn((line) => line.type === 'assistant');
    expect(run.received.at(-1)?.type).toBe('assistant');
    await expectFailedOnA(run);
  }, 60_000);
});
