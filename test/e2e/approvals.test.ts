/**
 * Human-in-the-loop approvals end to end: the agent (the real Agent SDK in a bubblewrap runner,
 * scripted by the model stub) calls the platform tool `request_approval`; the run parks with an
 * `approval` line; a signed approve or deny resumes it, or the approval expires and the run fails.
 */
import { createHmac, generateKeyPairSync, randomBytes, sign as ed25519Sign } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../api-server/core/canonical-json.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { isTerminal, type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser, userToken } from '../helpers/provision.js';
import { type Decision, hmacAssertion } from '../helpers/approver.js';
import { ADMIN_TOKEN, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

const TOOL = 'mcp__platform__request_approval';

/** A local upstream the agent reaches through the egress proxy: it records what arrived. */
const received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
let upstream: Server;
let upstreamPort: number;
/** Every response body the tests saw, searched for canaries. */
const seen: string[] = [];

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;
let hmacKey: { id: string; secret: string };
let edKey: { id: string; privateKey: ReturnType<typeof generateKeyPairSync>['privateKey'] };

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.end('deployed\n');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  stub = await startModelStub();
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_EGRESS_ALLOW: `127.0.0.1:${upstreamPort}`,
    ACIS_POOL_SIZE: '1',
    ACIS_MAX_SANDBOXES: '6',
    ACIS_PING_INTERVAL_MS: '200',
    ACIS_APPROVAL_TTL_SECONDS: '120',
  });
  ({ serviceKey: key } = await t.createIntegration('approvals e2e'));
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
  const hmac = await t.request('POST', `/admin/tenants/${user.tenantId}/approver-keys`, {
    token: ADMIN_TOKEN,
    body: { algorithm: 'hmac-sha256' },
  });
  expect(hmac.status, hmac.text).toBe(201);
  hmacKey = { id: hmac.body.id, secret: hmac.body.secret };
  const pair = generateKeyPairSync('ed25519');
  const publicKey = (pair.publicKey.export({ format: 'jwk' }) as { x: string }).x;
  const ed = await t.request('POST', `/admin/tenants/${user.tenantId}/approver-keys`, {
    token: ADMIN_TOKEN,
    body: { algorithm: 'ed25519', public_key: publicKey },
  });
  expect(ed.status, ed.text).toBe(201);
  edKey = { id: ed.body.id, privateKey: pair.privateKey };
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
  upstream?.close();
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

function hmacSignature(approvalId: string, decision: Decision, exp = nowSeconds() + 120, secret = hmacKey.secret, keyId = hmacKey.id) {
  return hmacAssertion(approvalId, decision, { id: keyId, secret }, exp);
}

function ed25519Signature(approvalId: string, decision: Decision, exp = nowSeconds() + 120) {
  const payload = Buffer.from(canonicalJson({ approval_id: approvalId, decision, exp }));
  return { key_id: edKey.id, algorithm: 'ed25519', exp, value: ed25519Sign(null, payload, edKey.privateKey).toString('base64url') };
}

function raise(input: object, after = ''): string {
  return `Please do the risky thing. [[tool:${TOOL} ${JSON.stringify(input)}]]${after}`;
}

async function newConversation(mode: 'pooled' | 'warm' = 'pooled'): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId, runtime: { mode } } });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

interface ParkedRun {
  messageId: string;
  approval: any;
  /** Every line of the stream, resolved when it ends. */
  lines: Promise<Line[]>;
  /** Stops reading (a client that goes away). */
  disconnect(): void;
}

/** Sends a message that raises an approval and reads its stream until the `approval` line. */
async function parkRun(conversationId: string, content: string, extra: object = {}): Promise<ParkedRun> {
  const controller = new AbortController();
  const response = await fetch(`${t.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ content, ...extra }),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const messageId = response.headers.get('x-service-message-id')!;
  let markParked: (approval: any) => void = () => {};
  const parked = new Promise<any>((resolve) => (markParked = resolve));
  const lines = readLines(response, (line) => {
    if (line.object === 'platform.event' && line.type === 'approval') markParked(line.approval);
  })
    .then((all) => {
      seen.push(JSON.stringify(all));
      return all;
    })
    .catch((error: unknown) => {
      if ((error as Error).name === 'AbortError') return [] as Line[];
      throw error;
    });
  const approval = await Promise.race([
    parked,
    lines.then((all) => {
      throw new Error(`the stream ended without an approval line: ${JSON.stringify(all).slice(0, 2000)}`);
    }),
  ]);
  return { messageId, approval, lines, disconnect: () => controller.abort() };
}

async function resolveApproval(approvalId: string, decision: Decision, body: object, token = key, headers: Record<string, string> = {}) {
  const res = await t.request('POST', `/approvals/${approvalId}/${decision}`, { token, body, headers });
  seen.push(res.text);
  return res;
}

async function getApproval(approvalId: string) {
  const res = await t.request('GET', `/approvals/${approvalId}`, { token: key });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

const platform = (lines: Line[], type: string) => lines.filter((l) => l.object === 'platform.event' && l.type === type);

describe('approve with HMAC', () => {
  it('parks the run, resumes it on a signed approve, and the agent sees the decision', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(
      conversationId,
      raise({ reason: 'Deploy to production', requested_items: [{ kind: 'action', description: 'deploy v2' }] }),
    );
    expect(run.approval).toMatchObject({
      object: 'approval',
      id: expect.stringMatching(/^apr_[A-Za-z0-9]+$/),
      tenant_id: user.tenantId,
      conversation_id: conversationId,
      message_id: run.messageId,
      status: 'pending',
      reason: 'Deploy to production',
      requested_items: [{ kind: 'action', description: 'deploy v2' }],
      resolved_by: null,
      resolved_at: null,
    });
    const lifetime = Date.parse(run.approval.expires_at) - Date.parse(run.approval.created_at);
    expect(lifetime).toBe(120_000);

    // Parked: keepalive pings go on, nothing else, and the message is still in progress.
    await sleep(700);
    const parkedMessage = await t.request('GET', `/conversations/${conversationId}/messages`, { token: key });
    expect(parkedMessage.body.data[0]).toMatchObject({ id: run.messageId, status: 'in_progress' });

    const res = await resolveApproval(run.approval.id, 'approve', {
      signature: hmacSignature(run.approval.id, 'approve'),
      note: 'ship it',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      id: run.approval.id,
      status: 'approved',
      resolved_by: `approver_key:${hmacKey.id}`,
      note: 'ship it',
    });
    expect(Date.parse(res.body.resolved_at)).toBeGreaterThan(0);

    const lines = await run.lines;
    const visible = withoutPings(lines);
    expect(lines.some((l) => l.event === 'ping')).toBe(true);
    const types = visible.map((l) => (l.object === 'platform.event' ? `platform:${l.type}` : l.type));
    const approvalAt = types.indexOf('platform:approval');
    const resumedAt = types.indexOf('platform:resumed');
    expect(approvalAt).toBeGreaterThan(0);
    expect(resumedAt).toBeGreaterThan(approvalAt);
    expect(types.slice(-2)).toEqual(['platform:message_end', 'result']);
    expect(visible.filter(isTerminal)).toHaveLength(1);
    expect(platform(visible, 'resumed')[0]!.approval).toMatchObject({ id: run.approval.id, status: 'approved' });

    // The tool's result reached the agent, which went on to answer with it.
    const reply = platform(visible, 'message_end')[0]!.message;
    expect(reply).toMatchObject({ id: run.messageId, status: 'completed' });
    expect(reply.content).toContain(`Tool ${TOOL} returned: Approved by approver_key:${hmacKey.id}.`);
    expect(reply.content).toContain('ship it');
    expect(await getApproval(run.approval.id)).toMatchObject({ status: 'approved', note: 'ship it' });

    // The logs: the run's lines carry the id of the send that started it, the approve's line its own
    // id and the run's message, so one id leads to the other.
    const logged = t.logs.map((line) => JSON.parse(line) as Record<string, unknown>);
    const started = logged.find((l) => l.msg === 'run started' && l.message_id === run.messageId);
    expect(started?.request_id).toEqual(expect.any(String));
    for (const msg of ['run parked on an approval', 'run resumed']) {
      expect(logged).toContainEqual(
        expect.objectContaining({ msg, approval_id: run.approval.id, message_id: run.messageId, request_id: started!.request_id }),
      );
    }
    expect(logged).toContainEqual(
      expect.objectContaining({
        msg: 'approval resolved',
        approval_id: run.approval.id,
        message_id: run.messageId,
        request_id: res.headers.get('x-request-id'),
      }),
    );
  });
});

describe('with the filler on', () => {
  it('streams the approval line after the filler text and the agent tool call, even when raised while the filler streams', async () => {
    const conversationId = await newConversation();
    // A slow filler: the agent raises the approval while the acknowledgement is still streaming.
    const run = await parkRun(conversationId, raise({ reason: 'With filler', requested_items: [] }, ' [[slow-filler: 600]]'), {
      filler: { enabled: true },
    });
    await resolveApproval(run.approval.id, 'approve', { signature: hmacSignature(run.approval.id, 'approve') });
    const lines = withoutPings(await run.lines);
    const firstDelta = lines.findIndex((l) => l.type === 'stream_event');
    const toolCall = lines.findIndex(
      (l) => l.type === 'assistant' && l.message.content.some((b: any) => b.type === 'tool_use' && b.name === TOOL),
    );
    const approvalAt = lines.findIndex((l) => l.type === 'approval');
    const resumedAt = lines.findIndex((l) => l.type === 'resumed');
    // The filler's deltas are the text deltas before the agent's init line.
    const agentInit = lines.findIndex((l) => l.type === 'system' && l.subtype === 'init');
    const fillerEnd = lines.findLastIndex((l, i) => i < agentInit && l.type === 'stream_event');
    expect(firstDelta).toBeGreaterThanOrEqual(0);
    expect(fillerEnd).toBeGreaterThanOrEqual(firstDelta);
    expect(toolCall).toBeGreaterThan(fillerEnd);
    expect(approvalAt).toBeGreaterThan(toolCall);
    expect(resumedAt).toBeGreaterThan(approvalAt);
    expect(lines.at(-1)).toMatchObject({ type: 'result' });
  });
});

describe('approve with Ed25519, supplying a secret', () => {
  it('vaults the secret at conversation scope: the resumed run uses it through the egress proxy and never sees it', async () => {
    const canary = `canary-approve-${randomBytes(8).toString('hex')}`;
    const conversationId = await newConversation('warm');
    // The placeholder is assembled by the shell: written out in the user's text, the send itself
    // would be refused (missing-secret) before the approval could ever supply it.
    const command = `P='{{secret:'; curl -s -X POST -H "X-Deploy-Token: \${P}DEPLOY_TOKEN}}" --data "token=\${P}DEPLOY_TOKEN}}" http://127.0.0.1:${upstreamPort}/deploy`;
    const run = await parkRun(
      conversationId,
      raise(
        {
          reason: 'Need the deploy token',
          requested_items: [{ kind: 'secret', description: 'token for the deploy API', alias: 'DEPLOY_TOKEN' }],
        },
        ` [[tool:Bash ${JSON.stringify({ command })}]]`,
      ),
    );
    expect(run.approval.requested_items).toEqual([{ kind: 'secret', description: 'token for the deploy API', alias: 'DEPLOY_TOKEN' }]);

    // A secret the approval did not ask for is refused, and the approval stays pending.
    const unasked = await resolveApproval(run.approval.id, 'approve', {
      signature: ed25519Signature(run.approval.id, 'approve'),
      secrets: { OTHER_TOKEN: canary },
    });
    expect(unasked.status).toBe(422);
    expect(unasked.body.errors).toEqual([expect.objectContaining({ pointer: '/secrets/OTHER_TOKEN' })]);
    expect((await getApproval(run.approval.id)).status).toBe('pending');

    const res = await resolveApproval(run.approval.id, 'approve', {
      signature: ed25519Signature(run.approval.id, 'approve'),
      secrets: { DEPLOY_TOKEN: canary },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'approved', resolved_by: `approver_key:${edKey.id}` });
    expect(res.text).not.toContain(canary);

    const lines = withoutPings(await run.lines);
    const reply = platform(lines, 'message_end')[0]!.message;
    expect(reply.status).toBe('completed');
    expect(reply.content).toContain('Tool Bash returned: deployed');
    // The upstream got the real value, in the header and in the body.
    const deploy = received.find((r) => r.body.startsWith('token='));
    expect(deploy?.headers['x-deploy-token']).toBe(canary);
    expect(deploy?.body).toBe(`token=${canary}`);

    // Listed as a conversation secret (alias only); the value is nowhere it must not be.
    const listed = await t.request('GET', `/conversations/${conversationId}/secrets`, { token: key });
    expect(listed.body.data.map((s: { alias: string }) => s.alias)).toEqual(['DEPLOY_TOKEN']);
    const history = await t.request('GET', `/conversations/${conversationId}/messages?limit=100`, { token: key });
    const approvals = await t.request('GET', `/conversations/${conversationId}/approvals`, { token: key });
    for (const text of [...seen, listed.text, history.text, approvals.text, t.logs.join('')]) expect(text).not.toContain(canary);
    expect(JSON.stringify(stub.agentRequests())).not.toContain(canary);
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      for (const table of ['messages', 'run_lines', 'approvals', 'secrets', 'agent_session_entries']) {
        const dump = await client.query(`select t::text as row from ${table} t`);
        expect(dump.rows.map((r) => r.row).join('\n')).not.toContain(canary);
      }
    } finally {
      await client.end();
    }
  });
});

describe('refusals leave the approval as it was', () => {
  it('answers 403 to every bad assertion and 409 once it is resolved', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(
      conversationId,
      raise({ reason: 'Delete the staging database', requested_items: [{ kind: 'action', description: 'drop staging' }] }),
    );
    const id = run.approval.id;

    // A key of another tenant.
    const other = await provisionUser(t, key);
    const foreign = await t.request('POST', `/admin/tenants/${other.tenantId}/approver-keys`, {
      token: ADMIN_TOKEN,
      body: { algorithm: 'hmac-sha256' },
    });
    // A revoked key of the right tenant.
    const revoked = await t.request('POST', `/admin/tenants/${user.tenantId}/approver-keys`, {
      token: ADMIN_TOKEN,
      body: { algorithm: 'hmac-sha256' },
    });
    expect((await t.request('DELETE', `/admin/approver-keys/${revoked.body.id}`, { token: ADMIN_TOKEN })).status).toBe(204);
    const good = hmacSignature(id, 'approve');
    const bad: Array<[string, object]> = [
      ['a wrong MAC', { ...good, value: createHmac('sha256', randomBytes(32)).update('x').digest('base64url') }],
      ['a MAC of another approval', { ...good, value: hmacSignature(`${id}x`, 'approve', good.exp).value }],
      ['the deny decision', hmacSignature(id, 'deny', good.exp)],
      ['an unknown key id', { ...good, key_id: 'apk_000000000000000000000000' }],
      ['a key of another tenant', hmacSignature(id, 'approve', good.exp, foreign.body.secret, foreign.body.id)],
      ['a revoked key', hmacSignature(id, 'approve', good.exp, revoked.body.secret, revoked.body.id)],
      ['a stale exp', hmacSignature(id, 'approve', nowSeconds() - 5)],
      ['an exp too far ahead', hmacSignature(id, 'approve', nowSeconds() + 3600)],
      ['another algorithm', { ...good, algorithm: 'ed25519' }],
      [
        'an Ed25519 signature under the HMAC key',
        { ...ed25519Signature(id, 'approve', good.exp), key_id: hmacKey.id, algorithm: 'hmac-sha256' },
      ],
      ['a value that is not base64url', { ...good, value: `${good.value}==` }],
    ];
    for (const [what, signature] of bad) {
      const res = await resolveApproval(id, 'approve', { signature });
      expect(res.status, what).toBe(403);
      expect(problemSlug(res), what).toBe('approval-signature-invalid');
    }
    // Deny with an approve-signed assertion is a decision mismatch too.
    const mismatch = await resolveApproval(id, 'deny', { signature: good });
    expect(problemSlug(mismatch)).toBe('approval-signature-invalid');
    const still = await getApproval(id);
    expect(still).toMatchObject({ status: 'pending', resolved_by: null, resolved_at: null, note: null });
    expect(still.updated_at).toBe(run.approval.updated_at);

    // The right one works, with an Idempotency-Key: a retry replays it.
    const headers = { 'Idempotency-Key': `approve-${id}` };
    const ok = await resolveApproval(id, 'approve', { signature: good }, key, headers);
    expect(ok.status, ok.text).toBe(200);
    const replay = await resolveApproval(id, 'approve', { signature: good }, key, headers);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(ok.body);

    // Without the key, resolving again is 409, approve or deny alike; nothing changes.
    const again = await resolveApproval(id, 'approve', { signature: hmacSignature(id, 'approve') });
    expect(again.status).toBe(409);
    expect(problemSlug(again)).toBe('approval-expired');
    const deny = await resolveApproval(id, 'deny', { signature: hmacSignature(id, 'deny') });
    expect(problemSlug(deny)).toBe('approval-expired');
    expect(await getApproval(id)).toEqual(ok.body);
    await run.lines;
  });

  it('answers 422 to a malformed body and 404 to an unknown approval', async () => {
    const missing = await resolveApproval('apr_000000000000000000000000', 'approve', {
      signature: hmacSignature('apr_000000000000000000000000', 'approve'),
    });
    expect(missing.status).toBe(404);
    const malformed = await resolveApproval('apr_000000000000000000000000', 'approve', { signature: { key_id: hmacKey.id } });
    expect(malformed.status).toBe(422);
    expect(problemSlug(malformed)).toBe('validation-error');
  });
});

describe('deny', () => {
  it('resolves the approval as denied; the agent gets a refusal and finishes its turn', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(
      conversationId,
      raise({ reason: 'Email every customer', requested_items: [{ kind: 'action', description: 'bulk email' }] }),
    );
    const res = await resolveApproval(run.approval.id, 'deny', { signature: hmacSignature(run.approval.id, 'deny'), note: 'not today' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'denied', resolved_by: `approver_key:${hmacKey.id}`, note: 'not today' });
    const lines = withoutPings(await run.lines);
    expect(platform(lines, 'resumed')[0]!.approval).toMatchObject({ id: run.approval.id, status: 'denied' });
    const reply = platform(lines, 'message_end')[0]!.message;
    expect(reply.status).toBe('completed');
    expect(reply.content).toContain(`Tool ${TOOL} failed: Denied by approver_key:${hmacKey.id}`);
    expect(reply.content).toContain('not today');
    expect(lines.at(-1)).toMatchObject({ type: 'result' });
  });
});

describe('expiry', () => {
  it('expires the approval at its deadline with no request arriving, and fails the attached run', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(
      conversationId,
      raise({ reason: 'Quick one', requested_items: [{ kind: 'action', description: 'x' }], expires_in_seconds: 2 }),
    );
    expect(Date.parse(run.approval.expires_at) - Date.parse(run.approval.created_at)).toBe(2000);
    const lines = withoutPings(await run.lines);
    expect(lines.slice(-2).map((l) => l.type)).toEqual(['message_end', 'error']);
    expect(lines.at(-2)!.message).toMatchObject({ id: run.messageId, status: 'failed' });
    expect(lines.at(-1)!.problem).toMatchObject({ type: expect.stringMatching(/\/problems\/approval-expired$/), status: 409 });
    expect(platform(lines, 'resumed')).toHaveLength(0);
    expect(await getApproval(run.approval.id)).toMatchObject({ status: 'expired', resolved_by: null });
    const late = await resolveApproval(run.approval.id, 'approve', { signature: hmacSignature(run.approval.id, 'approve') });
    expect(late.status).toBe(409);
    expect(problemSlug(late)).toBe('approval-expired');
  });

  it('caps the requested life at ACIS_APPROVAL_TTL_SECONDS', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(conversationId, raise({ reason: 'Long one', requested_items: [], expires_in_seconds: 999_999 }));
    expect(Date.parse(run.approval.expires_at) - Date.parse(run.approval.created_at)).toBe(120_000);
    await resolveApproval(run.approval.id, 'deny', { signature: hmacSignature(run.approval.id, 'deny') });
    await run.lines;
  });

  it('expires with no stream attached: the run fails in history and a re-attach ends with the error line', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(conversationId, raise({ reason: 'Nobody watching', requested_items: [], expires_in_seconds: 2 }));
    run.disconnect();
    await run.lines;
    let message: any;
    for (let i = 0; i < 50; i++) {
      const res = await t.request('GET', `/conversations/${conversationId}/messages`, { token: key });
      message = res.body.data[0];
      if (message.status !== 'in_progress') break;
      await sleep(200);
    }
    expect(message).toMatchObject({ id: run.messageId, status: 'failed' });
    expect((await getApproval(run.approval.id)).status).toBe('expired');
    const reattach = await t.request('GET', `/conversations/${conversationId}/messages/${run.messageId}/stream?after=0`, { token: key });
    const lines = withoutPings(
      reattach.text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
    );
    expect(lines.some((l) => l.type === 'approval')).toBe(true);
    expect(lines.at(-1)).toMatchObject({ type: 'error', problem: { status: 409 } });
  });
});

describe('a blocking send (stream=false)', () => {
  it('waits while parked and answers 201 with the completed reply once approved', async () => {
    const conversationId = await newConversation();
    const sent = t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: raise({ reason: 'Blocking', requested_items: [] }, ' [[reply: done after approval]]') },
    });
    let pending: any;
    for (let i = 0; i < 100 && !pending; i++) {
      const list = await t.request('GET', `/conversations/${conversationId}/approvals`, { token: key });
      pending = list.body.data[0];
      if (!pending) await sleep(100);
    }
    expect(pending).toMatchObject({ status: 'pending', reason: 'Blocking' });
    const approved = await resolveApproval(pending.id, 'approve', { signature: hmacSignature(pending.id, 'approve') });
    expect(approved.status).toBe(200);
    const res = await sent;
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ id: pending.message_id, role: 'assistant', status: 'completed' });
    expect(res.body.content).toContain('done after approval');
  });
});

describe('a parked run whose conversation is deleted', () => {
  it('ends at once with an error line (the conversation is gone)', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(conversationId, raise({ reason: 'About to vanish', requested_items: [] }));
    const deletedAt = Date.now();
    expect((await t.request('DELETE', `/conversations/${conversationId}`, { token: key })).status).toBe(204);
    const lines = withoutPings(await run.lines);
    // Promptly (the parked run re-reads its approval only every 10 s on its own).
    expect(Date.now() - deletedAt).toBeLessThan(5_000);
    expect(lines.at(-1)).toMatchObject({ type: 'error', problem: { status: 404 } });
    expect(lines.filter(isTerminal)).toHaveLength(1);
    expect((await t.request('GET', `/approvals/${run.approval.id}`, { token: key })).status).toBe(404);
  });
});

describe('a client that disconnected while parked', () => {
  it('finds the reply in history after the approval, and can re-attach from where it left', async () => {
    const conversationId = await newConversation();
    const run = await parkRun(conversationId, raise({ reason: 'Later', requested_items: [] }, ' [[reply: carried on after approval]]'));
    run.disconnect();
    await run.lines;
    const res = await resolveApproval(run.approval.id, 'approve', { signature: hmacSignature(run.approval.id, 'approve') });
    expect(res.status).toBe(200);
    let message: any;
    for (let i = 0; i < 100; i++) {
      const list = await t.request('GET', `/conversations/${conversationId}/messages`, { token: key });
      message = list.body.data[0];
      if (message.status !== 'in_progress') break;
      await sleep(100);
    }
    expect(message).toMatchObject({ id: run.messageId, status: 'completed' });
    expect(message.content).toContain('carried on after approval');
    const reattach = await t.request('GET', `/conversations/${conversationId}/messages/${run.messageId}/stream?after=0`, { token: key });
    const types = withoutPings(
      reattach.text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
    ).map((l) => l.type);
    expect(types.indexOf('resumed')).toBeGreaterThan(types.indexOf('approval'));
    expect(types.slice(-2)).toEqual(['message_end', 'result']);
  });
});

describe('reads', () => {
  it('serve approvals to the service key and the owning user, paginated per conversation, and nobody else', async () => {
    const conversationId = await newConversation();
    const ids: string[] = [];
    for (const reason of ['first', 'second']) {
      const run = await parkRun(conversationId, raise({ reason, requested_items: [] }));
      ids.push(run.approval.id);
      await resolveApproval(run.approval.id, 'deny', { signature: hmacSignature(run.approval.id, 'deny') });
      await run.lines;
    }
    const page1 = await t.request('GET', `/conversations/${conversationId}/approvals?limit=1`, { token: key });
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: ids[1] });
    expect(page1.body.data.map((a: any) => a.id)).toEqual([ids[1]]);
    const page2 = await t.request('GET', `/conversations/${conversationId}/approvals?limit=1&starting_after=${ids[1]}`, { token: key });
    expect(page2.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(page2.body.data.map((a: any) => a.id)).toEqual([ids[0]]);

    const owner = await userToken(t, key, user);
    expect((await t.request('GET', `/approvals/${ids[0]}`, { token: owner })).body).toMatchObject({ id: ids[0], reason: 'first' });
    expect((await t.request('GET', `/conversations/${conversationId}/approvals`, { token: owner })).body.data).toHaveLength(2);

    // Another user of the same tenant: 403; another integration: 404.
    const colleague = await provisionUser(t, key, { tenantId: user.tenantId });
    const colleagueToken = await userToken(t, key, colleague);
    expect((await t.request('GET', `/approvals/${ids[0]}`, { token: colleagueToken })).status).toBe(403);
    const stranger = await t.createIntegration('stranger');
    expect((await t.request('GET', `/approvals/${ids[0]}`, { token: stranger.serviceKey })).status).toBe(404);
    expect((await t.request('GET', `/conversations/${conversationId}/approvals`, { token: stranger.serviceKey })).status).toBe(404);
  });
});

describe('approve under ACIS_SECRETS_REQUIRE_HOSTS=1', () => {
  it('refuses a requested secret given as a plain string (422 secret-hosts-required, still pending), and takes it bound', async () => {
    const strict = await startTestServer({
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_SECRETS_REQUIRE_HOSTS: '1',
      ACIS_APPROVAL_TTL_SECONDS: '120',
    });
    try {
      const { serviceKey } = await strict.createIntegration('require hosts');
      const owner = await provisionUser(strict, serviceKey, { settings: { filler_enabled: false } });
      const created = await strict.request('POST', `/admin/tenants/${owner.tenantId}/approver-keys`, {
        token: ADMIN_TOKEN,
        body: { algorithm: 'hmac-sha256' },
      });
      expect(created.status, created.text).toBe(201);
      const approver = { id: created.body.id as string, secret: created.body.secret as string };
      const conversation = await strict.request('POST', '/conversations', { token: serviceKey, body: { user_id: owner.userId } });
      const response = await fetch(`${strict.url}/conversations/${conversation.body.id}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          content: raise({
            reason: 'Needs a token',
            requested_items: [{ kind: 'secret', description: 'deploy token', alias: 'DEPLOY_TOKEN' }],
          }),
        }),
      });
      let markParked: (approval: { id: string }) => void = () => {};
      const parked = new Promise<{ id: string }>((resolve) => (markParked = resolve));
      const lines = readLines(response, (line) => {
        if (line.object === 'platform.event' && line.type === 'approval') markParked(line.approval);
      });
      const approval = await parked;
      const approve = (secrets: object) =>
        strict.request('POST', `/approvals/${approval.id}/approve`, {
          token: serviceKey,
          body: { signature: hmacAssertion(approval.id, 'approve', approver), secrets },
        });

      const refused = await approve({ DEPLOY_TOKEN: 'plain-canary' });
      expect(refused.status, refused.text).toBe(422);
      expect(problemSlug(refused)).toBe('secret-hosts-required');
      expect(refused.text).not.toContain('plain-canary');
      expect((await strict.request('GET', `/approvals/${approval.id}`, { token: serviceKey })).body.status).toBe('pending');

      const accepted = await approve({ DEPLOY_TOKEN: { value: 'bound-canary', allowed_hosts: ['deploy.example.com'] } });
      expect(accepted.status, accepted.text).toBe(200);
      expect(accepted.body.status).toBe('approved');
      const all = await lines;
      expect(all.filter(isTerminal)).toHaveLength(1);
    } finally {
      await strict.stop();
    }
  });
});
