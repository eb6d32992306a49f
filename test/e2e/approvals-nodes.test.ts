/**
 * Approvals across API server processes sharing one PostgreSQL database: an approve that lands on
 * another process than the one parking the run resumes it (LISTEN/NOTIFY), and a pending approval
 * whose process died expires when that process comes back, so it can no longer be granted.
 * Node A runs in the test process; node B is a separate server process started from source.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { cleanEnv, type ServingAcis, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { hmacAssertion } from '../helpers/approver.js';
import { type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import {
  ADMIN_TOKEN,
  createTestDatabase,
  dropTestDatabase,
  problemSlug,
  startTestServer,
  type TestServer,
} from '../helpers/test-server.js';

const TOOL = 'mcp__platform__request_approval';
const MASTER_KEY = randomBytes(32).toString('base64');

let stub: ModelStub;
let nodeA: TestServer;
let nodeB: ServingAcis;
let nodeBDataDir: string;
let databaseUrl: string;
let key: string;
let user: ProvisionedUser;
let approver: { id: string; secret: string };

/** Node B: `acis serve` from source in its own process, on the shared database and master key. */
function startNodeB(): Promise<ServingAcis> {
  return serveAcis(
    cleanEnv({
      DATABASE_URL: databaseUrl,
      ACIS_DATA_DIR: nodeBDataDir,
      ACIS_MASTER_KEY: MASTER_KEY,
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_POOL_SIZE: '0',
      ACIS_PING_INTERVAL_MS: '200',
    }),
  );
}

beforeAll(async () => {
  stub = await startModelStub();
  databaseUrl = await createTestDatabase();
  nodeA = await startTestServer({
    DATABASE_URL: databaseUrl,
    ACIS_MASTER_KEY: MASTER_KEY,
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_PING_INTERVAL_MS: '200',
  });
  nodeBDataDir = await mkdtemp(path.join(tmpdir(), 'acis-node-b-'));
  nodeB = await startNodeB();
  ({ serviceKey: key } = await nodeA.createIntegration('approvals across nodes'));
  user = await provisionUser(nodeA, key, { settings: { filler_enabled: false } });
  const res = await nodeA.request('POST', `/admin/tenants/${user.tenantId}/approver-keys`, {
    token: ADMIN_TOKEN,
    body: { algorithm: 'hmac-sha256' },
  });
  approver = { id: res.body.id, secret: res.body.secret };
}, 120_000);

afterAll(async () => {
  if (nodeB) await stopAcis(nodeB);
  await nodeA?.stop();
  await stub?.stop();
  if (nodeBDataDir) await rm(nodeBDataDir, { recursive: true, force: true });
  // Made here and shared by both nodes, so neither drops it on its own.
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

const signature = (approvalId: string) => hmacAssertion(approvalId, 'approve', approver);

/** Starts a message on node B whose agent raises an approval; resolves once the `approval` line is there. */
async function parkOnNodeB(reason: string) {
  const conversation = await nodeA.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
  expect(conversation.status).toBe(201);
  const response = await fetch(`${nodeB.url}/conversations/${conversation.body.id}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content: `[[tool:${TOOL} ${JSON.stringify({ reason, requested_items: [] })}]] [[reply: done on B]]` }),
  });
  expect(response.status).toBe(200);
  const timeline: Array<{ line: Line; at: number }> = [];
  let markParked: (approval: any) => void = () => {};
  const parked = new Promise<any>((resolve) => (markParked = resolve));
  const lines = readLines(response, (line) => {
    timeline.push({ line, at: Date.now() });
    if (line.type === 'approval') markParked(line.approval);
  }).catch(() => [] as Line[]);
  const approval = await parked;
  return {
    conversationId: conversation.body.id as string,
    messageId: response.headers.get('x-service-message-id')!,
    approval,
    lines,
    timeline,
  };
}

describe('two API server processes on one database', () => {
  it('resumes a run parked on node B when the approve lands on node A', async () => {
    const run = await parkOnNodeB('cross-node');
    const approvedAt = Date.now();
    const res = await nodeA.request('POST', `/approvals/${run.approval.id}/approve`, {
      token: key,
      body: { signature: signature(run.approval.id) },
    });
    expect(res.status, res.text).toBe(200);
    const lines = withoutPings(await run.lines);
    const types = lines.map((l) => l.type);
    expect(types.indexOf('resumed')).toBeGreaterThan(types.indexOf('approval'));
    expect(types.slice(-2)).toEqual(['message_end', 'result']);
    expect(lines.find((l) => l.type === 'message_end')!.message.content).toContain('done on B');
    // Woken by the notification, not by the parked run's slow periodic re-read (10 s).
    const resumed = run.timeline.find(({ line }) => line.type === 'resumed')!;
    expect(resumed.at - approvedAt).toBeLessThan(5_000);
  });

  it('expires the pending approval of a run whose process died, once that process is back', async () => {
    const run = await parkOnNodeB('dies with its node');
    await stopAcis(nodeB, 'SIGKILL');
    await run.lines;
    // While B is down its run still looks in progress (its heartbeat is not stale yet).
    expect((await nodeA.request('GET', `/approvals/${run.approval.id}`, { token: key })).body.status).toBe('pending');

    nodeB = await startNodeB();
    const approval = await nodeA.request('GET', `/approvals/${run.approval.id}`, { token: key });
    expect(approval.body).toMatchObject({ status: 'expired', resolved_by: null });
    const messages = await nodeA.request('GET', `/conversations/${run.conversationId}/messages`, { token: key });
    expect(messages.body.data[0]).toMatchObject({ id: run.messageId, status: 'failed' });
    const late = await nodeA.request('POST', `/approvals/${run.approval.id}/approve`, {
      token: key,
      body: { signature: signature(run.approval.id) },
    });
    expect(late.status).toBe(409);
    expect(problemSlug(late)).toBe('approval-expired');
  }, 120_000);
});
