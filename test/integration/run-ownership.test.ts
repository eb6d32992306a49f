/**
 * Who may write a run: the node its message names (`messages.node_id`). A node taken for dead (its
 * run claimed by another) stores no more lines and no outcome of it, and exactly one of two nodes
 * claiming one orphaned run wins. Lines record the runner line they came from.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeRunOutcome } from '../../api-server/messages/messages.repository.js';
import { claimOrphanedRun } from '../../api-server/runs/nodes.js';
import { RunStream } from '../../api-server/runs/run-stream.js';
import { insertAssistantMessage } from '../helpers/assistant-message.js';
import { provisionUser } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let serviceKey: string;
let userId: string;
let counter = 0;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey } = await t.createIntegration('run ownership'));
  ({ userId } = await provisionUser(t, serviceKey));
});

afterAll(async () => {
  await t?.stop();
});

/** An assistant message in progress, hosted by `nodeId`, in a conversation of its own (one run in flight per conversation). */
async function runOn(nodeId: string): Promise<{ id: string; conversationId: string }> {
  const created = await t.request('POST', '/conversations', { token: serviceKey, body: { user_id: userId } });
  expect(created.status).toBe(201);
  const conversationId: string = created.body.id;
  const id = `msg_ownership_${++counter}`;
  await insertAssistantMessage(t.server.deps.db, { id, conversationId, status: 'in_progress', nodeId });
  return { id, conversationId };
}

const streamOf = (messageId: string, nodeId: string) =>
  new RunStream(messageId, { db: t.server.deps.db, logger: pino({ level: 'silent' }), now: () => new Date(), nodeId });

const storedLines = (messageId: string) =>
  t.server.deps.db.selectFrom('run_lines').select(['seq', 'line', 'link_seq']).where('message_id', '=', messageId).orderBy('seq').execute();

describe('RunStream: lines are stored only by the node hosting the run', () => {
  it('stores each line with the runner line it came from, and tells the highest one stored', async () => {
    const { id } = await runOn('node_a');
    const stream = streamOf(id, 'node_a');
    const settled: number[] = [];
    stream.onSettled((origin) => settled.push(origin));
    stream.append({ type: 'queued' });
    stream.append({ type: 'a' }, 3);
    stream.append({ type: 'b' }, 3);
    stream.append({ type: 'c' }, 4);
    await stream.flush();
    expect(await storedLines(id)).toEqual([
      { seq: 1, line: { type: 'queued' }, link_seq: null },
      { seq: 2, line: { type: 'a' }, link_seq: 3 },
      { seq: 3, line: { type: 'b' }, link_seq: 3 },
      { seq: 4, line: { type: 'c' }, link_seq: 4 },
    ]);
    expect(settled.at(-1)).toBe(4);
  });

  it('stores nothing once another node claimed the run, and refuses its outcome too', async () => {
    const { id, conversationId } = await runOn('node_a');
    const stream = streamOf(id, 'node_a');
    stream.append({ type: 'before' }, 1);
    await stream.flush();
    expect(
      await claimOrphanedRun(
        t.server.deps.db,
        { id, conversation_id: conversationId, node_id: 'node_a', request_id: null },
        'node_b',
        new Date(),
      ),
    ).toBe(true);
    stream.append({ type: 'after' }, 2);
    await stream.flush();
    expect((await storedLines(id)).map((row) => row.line)).toEqual([{ type: 'before' }]);
    const outcome = { status: 'completed' as const, content: 'late', parts: [], usage: null };
    expect(await storeRunOutcome(t.server.deps.db, id, 'node_a', outcome, new Date())).toBeUndefined();

    // The new host goes on from the stored line.
    const taken = new RunStream(id, { db: t.server.deps.db, logger: pino({ level: 'silent' }), now: () => new Date(), nodeId: 'node_b' }, [
      { type: 'before' },
    ]);
    taken.append({ type: 'on b' }, 2);
    await taken.flush();
    expect((await storedLines(id)).map((row) => row.line)).toEqual([{ type: 'before' }, { type: 'on b' }]);
    expect(await storeRunOutcome(t.server.deps.db, id, 'node_b', outcome, new Date())).toMatchObject({
      status: 'completed',
      content: 'late',
    });
  });

  it('a stream taken over whose stored lines already end with the terminal line takes no more', async () => {
    const { id } = await runOn('node_b');
    const taken = new RunStream(id, { db: t.server.deps.db, logger: pino({ level: 'silent' }), now: () => new Date(), nodeId: 'node_b' }, [
      { type: 'result' },
    ]);
    expect(taken.isEnded).toBe(true);
    taken.append({ type: 'late' }, 9);
    await taken.flush();
    expect(await storedLines(id)).toEqual([]);
  });

  it('claimOrphanedRun: of two nodes claiming one orphaned run, exactly one wins', async () => {
    const { id, conversationId } = await runOn('node_dead');
    const orphan = { id, conversation_id: conversationId, node_id: 'node_dead', request_id: null };
    const claims = await Promise.all([
      claimOrphanedRun(t.server.deps.db, orphan, 'node_b', new Date()),
      claimOrphanedRun(t.server.deps.db, orphan, 'node_c', new Date()),
    ]);
    expect(claims.filter(Boolean)).toHaveLength(1);
    const row = await t.server.deps.db.selectFrom('messages').select('node_id').where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.node_id).toBe(claims[0] ? 'node_b' : 'node_c');
  });
});
