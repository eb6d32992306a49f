/**
 * Killing (SIGKILL) the API replica that hosts a streaming run, and what a client then sees on the
 * replica that survives: shared by the local and the kubernetes suites. The victim is an `acis serve`
 * process; the survivor a test server on the same database.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { cleanEnv, killLeftovers, type ServingAcis, serveAcis, stopAcis } from './acis-process.js';
import { type Line, readLines, withoutPings } from './ndjson.js';
import { provisionUser } from './provision.js';
import { createTestDatabase, dropTestDatabase, startTestServer, type TestServer } from './test-server.js';

export const isDelta = (line: Line) => line.type === 'stream_event' && line.event?.type === 'content_block_delta';

/** `count` text deltas of three words, `delayMs` apart: a turn in progress for a while. */
export function slowTurn(count: number, delayMs: number): string {
  return `[[slow: ${delayMs}]] [[reply: ${Array.from({ length: count * 3 }, (_, i) => `w${i + 1}`).join(' ')}]]`;
}

export interface KilledRun {
  conversationId: string;
  messageId: string;
  /** Every line the client received from the victim before its stream broke, pings aside. */
  received: Line[];
  killedAt: number;
}

export interface ReplicaKill {
  survivor: TestServer;
  serviceKey: string;
  userId: string;
  /** The replica to send to (started again after a kill). */
  victim(): Promise<ServingAcis>;
  /** The victim was killed: the next `victim()` starts a new one. */
  killed(): void;
}

/**
 * Sends `content` to the victim and kills it once `killAfter` says so, or (without it) as soon as the
 * run's messages are stored, before its first line.
 */
export async function killDuringTurn(kit: ReplicaKill, content: string, killAfter?: (line: Line) => boolean): Promise<KilledRun> {
  const victim = await kit.victim();
  const conversation = await kit.survivor.request('POST', '/conversations', { token: kit.serviceKey, body: { user_id: kit.userId } });
  expect(conversation.status).toBe(201);
  const conversationId = conversation.body.id as string;
  let killedAt = 0;
  const kill = () => {
    if (killedAt) return;
    killedAt = Date.now();
    victim.process.kill('SIGKILL');
    kit.killed();
  };
  const sent = fetch(`${victim.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${kit.serviceKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content }),
  });
  const received: Line[] = [];
  if (killAfter) {
    const response = await sent;
    expect(response.status).toBe(200);
    await readLines(response, (line) => {
      // A client that stops reading where the replica died: lines already in its socket buffer are
      // not counted, so it re-attaches with the count it had, as a real client cut off there would.
      if (killedAt) return;
      received.push(line);
      if (killAfter(line)) kill();
    }).catch(() => undefined); // the connection breaks with the victim
  } else {
    // The stream's headers go out with its first line, so the stored message is the sign the run began.
    while ((await assistantMessageId(kit, conversationId)) === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    kill();
    await sent.then((response) => readLines(response, (line) => received.push(line))).catch(() => undefined);
  }
  await victim.exited;
  return { conversationId, messageId: (await assistantMessageId(kit, conversationId))!, received: withoutPings(received), killedAt };
}

async function assistantMessageId(kit: ReplicaKill, conversationId: string): Promise<string | undefined> {
  const row = await kit.survivor.server.deps.db
    .selectFrom('messages')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .where('role', '=', 'assistant')
    .executeTakeFirst();
  return row?.id;
}

/** Re-attaches on the survivor with the count the client had; resolves with the lines once the stream ends. */
export async function reattach(kit: ReplicaKill, run: KilledRun, after: number): Promise<Line[]> {
  const response = await fetch(`${kit.survivor.url}/conversations/${run.conversationId}/messages/${run.messageId}/stream?after=${after}`, {
    headers: { authorization: `Bearer ${kit.serviceKey}` },
  });
  expect(response.status).toBe(200);
  return withoutPings(await readLines(response));
}

/**
 * What every kill point must show: the lines the client had are stored with the numbers it counted;
 * re-attached on the survivor with that count it gets the rest, which ends `failed` (message_end and
 * the one `error` line) within `withinMs` of the kill, and the two together are the stored run.
 */
export async function expectFailedOnSurvivor(kit: ReplicaKill, run: KilledRun, withinMs: number): Promise<void> {
  // Checked at once, before the survivor adds a line.
  const stored = await kit.survivor.server.deps.db
    .selectFrom('run_lines')
    .select(['seq', 'line'])
    .where('message_id', '=', run.messageId)
    .orderBy('seq')
    .execute();
  expect(stored.slice(0, run.received.length)).toEqual(run.received.map((line, i) => ({ seq: i + 1, line })));

  const rest = await reattach(kit, run, run.received.length);
  const endedAfterMs = Date.now() - run.killedAt;
  expect(rest.slice(-2).map((line) => line.type)).toEqual(['message_end', 'error']);
  expect(rest.at(-1)!.problem).toMatchObject({ status: 500 });
  expect(rest.at(-2)!.message).toMatchObject({ id: run.messageId, status: 'failed' });
  expect(endedAfterMs).toBeLessThan(withinMs);
  const replay = await reattach(kit, run, 0);
  expect([...run.received, ...rest]).toEqual(replay);
  expect(replay.filter((line) => line.type === 'error' || line.type === 'result')).toHaveLength(1);
  const messages = await kit.survivor.request('GET', `/conversations/${run.conversationId}/messages`, { token: kit.serviceKey });
  expect(messages.body.data[0]).toMatchObject({ id: run.messageId, status: 'failed' });
}

/** The reply `slowTurn(count, ...)` asks the model for. */
export function slowReply(count: number): string {
  return Array.from({ length: count * 3 }, (_, i) => `w${i + 1}`).join(' ');
}

/**
 * What a run taken over must show: the lines the client had are stored with the numbers it counted;
 * re-attached on the survivor with that count it gets the rest, which ends `completed` (message_end
 * and the one `result`), and the two together are the stored run, numbered 1..n with no gap; every
 * text delta came once (together they are the reply) and the message stored is the whole reply.
 */
export async function expectCompletedOnSurvivor(kit: ReplicaKill, run: KilledRun, reply: string): Promise<void> {
  const storedAtKill = await storedLines(kit, run);
  expect(storedAtKill.slice(0, run.received.length)).toEqual(run.received.map((line, i) => ({ seq: i + 1, line })));

  const rest = await reattach(kit, run, run.received.length);
  expect(rest.slice(-2).map((line) => line.type)).toEqual(['message_end', 'result']);
  expect(rest.at(-2)!.message).toMatchObject({ id: run.messageId, status: 'completed', content: reply });
  const replay = await reattach(kit, run, 0);
  expect([...run.received, ...rest]).toEqual(replay);
  expect(replay.filter((line) => line.type === 'error' || line.type === 'result')).toHaveLength(1);
  const deltas = replay.filter(isDelta).map((line) => line.event.delta.text as string);
  expect(deltas.join('')).toBe(reply);
  const stored = await storedLines(kit, run);
  expect(stored.map((row) => row.seq)).toEqual(replay.map((_, i) => i + 1));
  const messages = await kit.survivor.request('GET', `/conversations/${run.conversationId}/messages`, { token: kit.serviceKey });
  expect(messages.body.data[0]).toMatchObject({ id: run.messageId, status: 'completed', content: reply });
}

function storedLines(kit: ReplicaKill, run: KilledRun) {
  return kit.survivor.server.deps.db
    .selectFrom('run_lines')
    .select(['seq', 'line'])
    .where('message_id', '=', run.messageId)
    .orderBy('seq')
    .execute();
}

/** Both replicas renew their liveness row twice a second; one is taken for gone once its row is `staleSeconds` old. */
export const livenessEnv = (staleSeconds: number) => ({
  ACIS_NODE_HEARTBEAT_SECONDS: '0.5',
  ACIS_NODE_STALE_SECONDS: String(staleSeconds),
});

/**
 * Registers the suite's two replicas on a database of their own: the survivor, a test server with
 * `env(databaseUrl)` and `survivorEnv`, and the victim, `acis serve` from source with the same `env`
 * and a data dir of its own (started again after a kill); an integration and a user to send as.
 * Whatever the suite starts before (model stub, cluster) goes in its own hooks, registered first.
 */
export function useReplicaPair(options: {
  name: string;
  env: (databaseUrl: string) => Record<string, string>;
  survivorEnv?: () => Record<string, string>;
}): ReplicaKill & { readonly tenantId: string } {
  let databaseUrl: string;
  let env: Record<string, string>;
  let survivor: TestServer;
  let victim: ServingAcis | undefined;
  let victimDataDir: string;
  let serviceKey: string;
  let userId: string;
  let tenantId: string;
  const liveVictim = async () => {
    victim ??= await serveAcis(cleanEnv({ ...env, ACIS_DATA_DIR: victimDataDir }));
    return victim;
  };
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    env = options.env(databaseUrl);
    survivor = await startTestServer({ ...env, ...options.survivorEnv?.() });
    victimDataDir = await mkdtemp(path.join(tmpdir(), 'acis-node-b-'));
    await liveVictim();
    ({ serviceKey } = await survivor.createIntegration(options.name));
    ({ userId, tenantId } = await provisionUser(survivor, serviceKey, { settings: { filler_enabled: false } }));
  }, 120_000);
  afterAll(async () => {
    if (victim) await stopAcis(victim);
    killLeftovers();
    await survivor?.stop();
    if (victimDataDir) await rm(victimDataDir, { recursive: true, force: true });
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });
  return {
    get survivor() {
      return survivor;
    },
    get serviceKey() {
      return serviceKey;
    },
    get userId() {
      return userId;
    },
    get tenantId() {
      return tenantId;
    },
    victim: liveVictim,
    killed: () => {
      victim = undefined;
    },
  };
}
