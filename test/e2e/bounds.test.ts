/**
 * Bounds per tenant and per run. No tenant starves the others: caps on the sandboxes a tenant and a user keep busy at once (tenant
 * settings over deployment defaults), counted in PostgreSQL across two API nodes, answered as the
 * cluster cap answers (429 capacity-exhausted before anything is stored, or `queued` lines under
 * on_capacity=hold); the turn deadline (ACIS_TURN_TIMEOUT_SECONDS); the local runners' workspace
 * size limit (ACIS_WORKSPACE_MAX_MB). Runs are real (Agent SDK in
 * bubblewrap against the model stub); a sandbox is kept busy by a run parked on an approval, and
 * freed by denying it, so no test waits for time.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { hmacAssertion } from '../helpers/approver.js';
import { deltaText, type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { slowTurn } from '../helpers/replica-kill.js';
import { probeLimitEnforcement } from '../../api-server/sandboxes/local/resource-limits.js';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../helpers/test-server.js';

const MASTER_KEY = randomBytes(32).toString('base64');
const TURN_TIMEOUT_SECONDS = 5;
const WORKSPACE_MAX_MB = 8;
const PARK = `Hold this sandbox. [[tool:mcp__platform__request_approval {"reason":"keep busy","requested_items":[{"kind":"action","description":"wait"}]}]]`;

let stub: ModelStub;
/** Node A: a short maximum hold (2 s). Node B: on the same database, the turn deadline, the workspace limit and a long hold. */
let a: TestServer;
let b: TestServer;
let key: string;

const common = {
  ACIS_MASTER_KEY: MASTER_KEY,
  ACIS_POOL_SIZE: '1',
  ACIS_MAX_SANDBOXES: '8',
  ACIS_PING_INTERVAL_MS: '200',
  ACIS_APPROVAL_TTL_SECONDS: '120',
  // The deployment default for users; tenants have none unless their settings say so.
  ACIS_USER_MAX_BUSY_SANDBOXES: '1',
};

beforeAll(async () => {
  stub = await startModelStub();
  // The workspace limit is on `a`, away from `b`'s short turn deadline: a turn stopped by the size
  // check must not race the deadline.
  a = await startTestServer({
    ...common,
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_MAX_HOLD_SECONDS: '2',
    ACIS_WORKSPACE_MAX_MB: String(WORKSPACE_MAX_MB),
  });
  b = await startTestServer({
    ...common,
    DATABASE_URL: a.databaseUrl,
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_MAX_HOLD_SECONDS: '60',
    ACIS_TURN_TIMEOUT_SECONDS: String(TURN_TIMEOUT_SECONDS),
  });
  ({ serviceKey: key } = await a.createIntegration('busy caps e2e'));
}, 120_000);
afterAll(async () => {
  await b?.stop();
  await a?.stop();
  await stub?.stop();
});

// ---------------------------------------------------------------- helpers

interface Tenant {
  users: ProvisionedUser[];
  approver: { id: string; secret: string };
}

async function tenantWith(settings: object, userCount: number): Promise<Tenant> {
  const first = await provisionUser(a, key, { settings: { filler_enabled: false, ...settings } });
  const users = [first];
  while (users.length < userCount) users.push(await provisionUser(a, key, { tenantId: first.tenantId }));
  const res = await a.request('POST', `/admin/tenants/${first.tenantId}/approver-keys`, {
    token: ADMIN_TOKEN,
    body: { algorithm: 'hmac-sha256' },
  });
  expect(res.status, res.text).toBe(201);
  return { users, approver: { id: res.body.id, secret: res.body.secret } };
}

async function newConversation(user: ProvisionedUser): Promise<string> {
  const res = await a.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

function send(node: TestServer, conversationId: string, body: object, query = ''): Promise<Response> {
  return fetch(`${node.url}/conversations/${conversationId}/messages${query}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

interface Busy {
  /** Every line of the run, once it has ended. */
  lines: Promise<Line[]>;
  /** Denies the approval the run is parked on: the run ends and its sandbox is no longer busy. */
  free(): Promise<Line[]>;
}

/** Reads a stream of a run that parks on an approval, up to the `approval` line. */
async function parked(tenant: Tenant, response: Response): Promise<Busy> {
  expect(response.status).toBe(200);
  let onApproval: (approval: { id: string }) => void = () => {};
  const approval = new Promise<{ id: string }>((resolve) => (onApproval = resolve));
  const lines = readLines(response, (line) => {
    if (line.object === 'platform.event' && line.type === 'approval') onApproval(line.approval);
  });
  const { id } = await Promise.race([
    approval,
    lines.then((all) => {
      throw new Error(`the run ended without parking: ${JSON.stringify(all).slice(0, 2000)}`);
    }),
  ]);
  return {
    lines,
    async free() {
      const res = await a.request('POST', `/approvals/${id}/deny`, {
        token: key,
        body: { signature: hmacAssertion(id, 'deny', tenant.approver) },
      });
      expect(res.status, res.text).toBe(200);
      const all = await lines;
      expect(all.at(-1)).toMatchObject({ type: 'result' });
      return all;
    },
  };
}

/** A run of `user` on a conversation of its own, parked on an approval: one busy sandbox. */
async function occupy(tenant: Tenant, user: ProvisionedUser, node: TestServer = a): Promise<Busy> {
  return parked(tenant, await send(node, await newConversation(user), { content: PARK }));
}

async function expectRefusedOverCap(res: Response, cap: 'tenant' | 'user') {
  const body = (await res.json()) as { detail: string };
  expect(res.status, JSON.stringify(body)).toBe(429);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(body).toMatchObject({ status: 429, type: expect.stringMatching(/\/problems\/capacity-exhausted$/) });
  expect(body.detail).toContain(cap === 'tenant' ? "tenant's cap" : "user's cap");
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

/** Nothing of a refused send is stored: no message, no counters. */
async function expectNothingStored(conversationId: string) {
  const conversation = await a.request('GET', `/conversations/${conversationId}`, { token: key });
  expect(conversation.body).toMatchObject({ message_count: 0, last_message_at: null, title: null });
  const messages = await a.request('GET', `/conversations/${conversationId}/messages`, { token: key });
  expect(messages.body.data).toEqual([]);
}

async function served(node: TestServer, conversationId: string, text: string, extra: object = {}): Promise<Line[]> {
  const res = await send(node, conversationId, { content: `[[reply: ${text}]]`, ...extra });
  expect(res.status).toBe(200);
  const lines = withoutPings(await readLines(res));
  expect(lines.at(-1), JSON.stringify(lines).slice(0, 2000)).toMatchObject({ type: 'result', subtype: 'success' });
  expect(deltaText(lines)).toBe(text);
  return lines;
}

// ---------------------------------------------------------------- tests

describe('tenant settings max_busy_sandboxes, max_busy_sandboxes_per_user', () => {
  it('default to null (the deployment default), take 1 to 10000, and refuse anything else with 422, changing nothing', async () => {
    const tenant = await a.request('PUT', `/tenants/by-external-id/caps-settings-${randomBytes(3).toString('hex')}`, {
      token: key,
      body: {},
    });
    expect(tenant.status).toBe(201);
    expect(tenant.body.settings).toMatchObject({ max_busy_sandboxes: null, max_busy_sandboxes_per_user: null });
    for (const bad of [0, -1, 1.5, 10_001, '2']) {
      const res = await a.request('PATCH', `/tenants/${tenant.body.id}`, { token: key, body: { settings: { max_busy_sandboxes: bad } } });
      expect(res.status, JSON.stringify(bad)).toBe(422);
      expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/settings/max_busy_sandboxes' })]);
    }
    const set = await a.request('PATCH', `/tenants/${tenant.body.id}`, {
      token: key,
      body: { settings: { max_busy_sandboxes: 3, max_busy_sandboxes_per_user: 10_000 } },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.body.settings).toMatchObject({ max_busy_sandboxes: 3, max_busy_sandboxes_per_user: 10_000 });
    const read = await a.request('GET', `/tenants/${tenant.body.id}`, { token: key });
    expect(read.body.settings).toEqual(set.body.settings);
  });
});

describe('POST /conversations/{id}/messages over the tenant cap', () => {
  it('answers 429 capacity-exhausted before storing anything, for stream and stream=false; other tenants are served; freed, the send goes through', async () => {
    const tenant = await tenantWith({ max_busy_sandboxes: 1, max_busy_sandboxes_per_user: 5 }, 2);
    const [first, second] = tenant.users;
    const busy = await occupy(tenant, first!);

    const waiting = await newConversation(second!);
    await expectRefusedOverCap(await send(a, waiting, { content: '[[reply: too many]]' }), 'tenant');
    await expectRefusedOverCap(await send(b, waiting, { content: '[[reply: too many]]' }, '?stream=false'), 'tenant');
    await expectNothingStored(waiting);
    // Creating a conversation with an initial message is refused the same way.
    const created = await fetch(`${a.url}/conversations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: second!.userId, initial_message: { content: '[[reply: too many]]' } }),
    });
    await expectRefusedOverCap(created, 'tenant');

    // A tenant without a cap of its own is not held back by this one.
    const other = await tenantWith({}, 1);
    await served(a, await newConversation(other.users[0]!), 'other tenant served');

    await busy.free();
    await served(a, waiting, 'served once freed');
  }, 120_000);

  it('lets exactly one of many concurrent sends, spread over two API nodes, pass a cap of 1', async () => {
    const tenant = await tenantWith({ max_busy_sandboxes: 1, max_busy_sandboxes_per_user: 10 }, 1);
    const conversations = await Promise.all([0, 1, 2, 3, 4, 5].map(() => newConversation(tenant.users[0]!)));
    const responses = await Promise.all(conversations.map((id, i) => send(i % 2 === 0 ? a : b, id, { content: PARK })));
    const statuses = responses.map((r) => r.status);
    expect(
      statuses.filter((s) => s === 200),
      JSON.stringify(statuses),
    ).toHaveLength(1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(5);
    for (const [i, res] of responses.entries()) {
      if (res.status === 429) {
        await expectRefusedOverCap(res, 'tenant');
        await expectNothingStored(conversations[i]!);
      }
    }
    const busy = await parked(tenant, responses.find((r) => r.status === 200)!);
    await busy.free();
  }, 120_000);
});

describe('POST /conversations/{id}/messages over the user cap', () => {
  it('applies the deployment default (ACIS_USER_MAX_BUSY_SANDBOXES=1) to the user alone; a tenant setting raises it', async () => {
    const tenant = await tenantWith({}, 2);
    const [first, second] = tenant.users;
    const busy = await occupy(tenant, first!);
    const again = await newConversation(first!);
    await expectRefusedOverCap(await send(b, again, { content: '[[reply: mine too]]' }), 'user');
    await expectNothingStored(again);
    // Another user of the same tenant is not held back.
    await served(a, await newConversation(second!), 'another user served');
    await busy.free();

    const roomy = await tenantWith({ max_busy_sandboxes_per_user: 2 }, 1);
    const user = roomy.users[0]!;
    const both = [await occupy(roomy, user), await occupy(roomy, user, b)];
    const third = await newConversation(user);
    await expectRefusedOverCap(await send(a, third, { content: '[[reply: third]]' }), 'user');
    await expectNothingStored(third);
    for (const run of both) await run.free();
  }, 120_000);
});

describe('on_capacity=hold over a busy-sandbox cap', () => {
  it('queues the run until a place frees up on another node, then serves it', async () => {
    const tenant = await tenantWith({ max_busy_sandboxes: 1, max_busy_sandboxes_per_user: 5 }, 2);
    const busy = await occupy(tenant, tenant.users[0]!, a);
    const conversation = await newConversation(tenant.users[1]!);
    // Node B holds up to 60 s; the place frees up on node A.
    const res = await send(b, conversation, { content: '[[reply: held then served]]', on_capacity: 'hold' });
    expect(res.status).toBe(200);
    let onQueued: () => void = () => {};
    const queued = new Promise<void>((resolve) => (onQueued = resolve));
    const lines = readLines(res, (line) => {
      if (line.type === 'queued') onQueued();
    });
    await queued;
    await busy.free();
    const all = withoutPings(await lines);
    expect(all[0]).toMatchObject({ object: 'platform.event', type: 'queued', position: 1, retry_hint_seconds: expect.any(Number) });
    expect(all.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    expect(deltaText(all)).toBe('held then served');
  }, 120_000);

  it('ends the run with a capacity-exhausted error line past the maximum hold, the message failed', async () => {
    const tenant = await tenantWith({ max_busy_sandboxes: 1, max_busy_sandboxes_per_user: 5 }, 2);
    const busy = await occupy(tenant, tenant.users[0]!, a);
    const conversation = await newConversation(tenant.users[1]!);
    const res = await send(a, conversation, { content: '[[reply: never]]', on_capacity: 'hold' });
    expect(res.status).toBe(200);
    const lines = withoutPings(await readLines(res));
    expect(lines[0]).toMatchObject({ type: 'queued', position: 1 });
    expect(lines.some((l) => l.type === 'system')).toBe(false);
    expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed', content: '' } });
    expect(lines.at(-1)).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 429, type: expect.stringMatching(/\/problems\/capacity-exhausted$/) },
    });
    expect(lines.at(-1)!.problem.detail).toContain("tenant's cap");
    await busy.free();
  }, 120_000);
});

describe('ACIS_TURN_TIMEOUT_SECONDS', () => {
  it('ends a turn that runs past it failed, with a turn-timeout error line, the runner stopped', async () => {
    const tenant = await tenantWith({}, 1);
    const conversation = await newConversation(tenant.users[0]!);
    // 40 deltas 500 ms apart: 20 s, four times the deadline.
    const startedAt = Date.now();
    const res = await send(b, conversation, { content: slowTurn(40, 500) });
    expect(res.status).toBe(200);
    const messageId = res.headers.get('x-service-message-id')!;
    const lines = withoutPings(await readLines(res));
    const elapsed = (Date.now() - startedAt) / 1000;
    expect(elapsed).toBeGreaterThanOrEqual(TURN_TIMEOUT_SECONDS);
    expect(elapsed).toBeLessThan(18);
    expect(lines.some((l) => l.type === 'result')).toBe(false);
    expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { id: messageId, status: 'failed' } });
    const error = lines.at(-1)!;
    expect(error).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 504, title: 'Turn timed out', type: expect.stringMatching(/\/problems\/turn-timeout$/) },
    });
    // The stored run ends the same way for a client that re-attaches.
    const replay = await a.request('GET', `/conversations/${conversation}/messages/${messageId}/stream`, { token: key });
    expect(
      replay.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .at(-1),
    ).toMatchObject({ type: 'error', problem: { status: 504 } });
    const stored = await a.request('GET', `/conversations/${conversation}/messages`, { token: key });
    expect(stored.body.data.map((m: { id: string; status: string }) => [m.id, m.status])).toContainEqual([messageId, 'failed']);
    // The runner that ran the turn was stopped, not left streaming into the void.
    expect(b.server.deps.runtime.provider.views().some((r) => r.conversationId === conversation && r.state === 'busy')).toBe(false);
    // The next turn runs.
    await served(b, conversation, 'after the deadline');
  }, 120_000);

  it('answers 504 turn-timeout with stream=false', async () => {
    const tenant = await tenantWith({}, 1);
    const conversation = await newConversation(tenant.users[0]!);
    const res = await send(b, conversation, { content: slowTurn(40, 500) }, '?stream=false');
    expect(res.status).toBe(504);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({ status: 504, type: expect.stringMatching(/\/problems\/turn-timeout$/) });
  }, 120_000);
});

describe('ACIS_WORKSPACE_MAX_MB (local runners)', () => {
  const bash = (command: string) => `[[tool:Bash ${JSON.stringify({ command })}]]`;

  it('ends a turn whose workspace passes it failed with workspace-too-large, and keeps the workspace the conversation had', async () => {
    const tenant = await tenantWith({}, 1);
    const conversation = await newConversation(tenant.users[0]!);
    const first = withoutPings(await readLines(await send(a, conversation, { content: bash('echo kept > kept.txt') })));
    expect(first.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });

    // 12 MB written by the tool, which then waits: the turn ends only when the size check stops it.
    const res = await send(a, conversation, { content: bash('head -c 12000000 /dev/zero > big.bin && sleep 100') });
    const lines = withoutPings(await readLines(res));
    expect(lines.some((l) => l.type === 'result')).toBe(false);
    expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed' } });
    expect(lines.at(-1)).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 507, type: expect.stringMatching(/\/problems\/workspace-too-large$/) },
    });
    expect(lines.at(-1)!.problem.detail).toContain(`limit of ${WORKSPACE_MAX_MB * 1024 * 1024} bytes`);

    // The next turn sees the workspace as the first turn left it.
    const after = withoutPings(await readLines(await send(a, conversation, { content: bash('ls') })));
    expect(after.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    expect(deltaText(after)).toContain('kept.txt');
    expect(deltaText(after)).not.toContain('big.bin');
  }, 120_000);
});

describe('ACIS_RUNNER_CPUS, ACIS_RUNNER_MEMORY_MB (local runners)', () => {
  it('are said at start to be enforced, or not and why, as this machine allows', async () => {
    const probe = await probeLimitEnforcement({ cpus: 2, memoryBytes: 2048 * 1024 * 1024 });
    const said = a.logs.map((line) => JSON.parse(line)).filter((line) => /^runner CPU and memory/.test(line.msg ?? ''));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject(
      probe.enforced
        ? { level: 30, cpus: 2, memory_bytes: 2048 * 1024 * 1024 }
        : { level: 40, cpus: 2, memory_bytes: 2048 * 1024 * 1024, reason: probe.reason },
    );
  });
});
