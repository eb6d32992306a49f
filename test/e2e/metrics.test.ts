/**
 * `/metrics` of the API server (the in-process egress proxy's series included), read with a
 * Prometheus text parser around a known sequence of requests: plain API calls, one agent turn that
 * calls out through the egress proxy with a vaulted secret, a run parked on an approval while a
 * capacity rejection and a held run happen, two repository syncs and a rate-limit refusal. Every series is checked by its change
 * across the sequence. No id, external id, token or secret may appear anywhere in what is served.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../api-server/core/ids.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { hmacAssertion } from '../helpers/approver.js';
import { createGitRepository, manifest } from '../../hack/git-server.js';
import { type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type Exposition, parsePrometheusText, samplesOf, sumOf } from '../helpers/prometheus-text.js';
import { type ProvisionedUser, provisionUser, syncEnded, unique } from '../helpers/provision.js';
import { ADMIN_TOKEN, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

const METRICS_TOKEN = `metrics-${randomBytes(12).toString('hex')}`;
const CANARY_SECRET = `canary-secret-${randomBytes(8).toString('hex')}`;
const CANARY_EXTERNAL_ID = `canary-conversation-${randomBytes(8).toString('hex')}`;
const APPROVAL_TOOL = 'mcp__platform__request_approval';

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;
let approver: { id: string; secret: string };
let repoRoot: string;
const upstreams: Server[] = [];
let allowedPort: number;
let unlistedPort: number;
/** Every id and value the sequence made, none of which may be served by /metrics. */
const canaries = new Set<string>([METRICS_TOKEN, CANARY_SECRET, CANARY_EXTERNAL_ID]);
/** Every exposition served during the tests. */
const served: string[] = [];

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstreams.push(server);
  return (server.address() as AddressInfo).port;
}

const answerOk = (_req: IncomingMessage, res: ServerResponse) => res.end('ok');

beforeAll(async () => {
  allowedPort = await listen(createServer(answerOk));
  unlistedPort = await listen(createServer(answerOk));
  repoRoot = await mkdtemp(path.join(tmpdir(), 'acis-metrics-repos-'));
  stub = await startModelStub();
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_POOL_SIZE: '0',
    ACIS_MAX_SANDBOXES: '1',
    ACIS_PING_INTERVAL_MS: '200',
    ACIS_METRICS_TOKEN: METRICS_TOKEN,
    ACIS_EGRESS_ALLOW: `127.0.0.1:${allowedPort}`,
    ACIS_ALLOW_FILE_REPOS: '1',
    ACIS_RATE_LIMIT_TOKEN_EXCHANGE: '1',
  });
  ({ serviceKey: key } = await t.createIntegration('metrics e2e'));
  canaries.add(key);
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
  for (const value of [user.tenantId, user.tenantExternalId, user.userId, user.userExternalId, user.roleId]) canaries.add(value);
  const approverKey = await t.request('POST', `/admin/tenants/${user.tenantId}/approver-keys`, {
    token: ADMIN_TOKEN,
    body: { algorithm: 'hmac-sha256' },
  });
  expect(approverKey.status, approverKey.text).toBe(201);
  approver = { id: approverKey.body.id, secret: approverKey.body.secret };
  canaries.add(approver.secret);
});

afterAll(async () => {
  await t?.stop();
  await stub?.stop();
  for (const server of upstreams) server.close();
  if (repoRoot) await rm(repoRoot, { recursive: true, force: true });
});

async function scrape(): Promise<Exposition> {
  const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  const text = await res.text();
  served.push(text);
  return parsePrometheusText(text);
}

type Delta = (name: string, labels?: Record<string, string>) => number;

/**
 * Runs `action` between two scrapes; answers how much each series changed. A run is counted once it
 * has ended, which can be just after its client saw the last line: `settled` says when the second
 * scrape has everything the action caused.
 */
async function across(action: () => Promise<void>, settled: (delta: Delta) => boolean = () => true): Promise<Delta> {
  const before = await scrape();
  await action();
  for (const deadline = Date.now() + 10_000; ; ) {
    const after = await scrape();
    const delta: Delta = (name, labels = {}) => sumOf(after, name, labels) - sumOf(before, name, labels);
    if (settled(delta) || Date.now() > deadline) return delta;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const runsEnded = (count: number) => (delta: Delta) => delta('acis_runs_total') >= count;

async function newConversation(body: object = {}): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId, ...body } });
  expect(res.status, res.text).toBe(201);
  canaries.add(res.body.id);
  return res.body.id;
}

function openStream(conversationId: string, body: object): Promise<Response> {
  return fetch(`${t.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** Reads a stream in the background; `seen` resolves at the first line `match` accepts. */
function follow(response: Response, match: (line: Line) => boolean) {
  let mark: (line: Line) => void = () => {};
  const seen = new Promise<Line>((resolve) => (mark = resolve));
  const done = readLines(response, (line) => {
    if (match(line)) mark(line);
  }).then(withoutPings);
  return { seen, done };
}

describe('GET /metrics', () => {
  it('wants the metrics token as a bearer token when ACIS_METRICS_TOKEN is set', async () => {
    const refused: Record<string, string>[] = [{}, { authorization: 'Bearer not-the-metrics-token' }, { authorization: `Bearer ${key}` }];
    for (const headers of refused) {
      const res = await t.request('GET', '/metrics', { headers });
      expect(res.status).toBe(401);
      expect(problemSlug(res)).toBe('insufficient-scope');
      expect(res.text).not.toContain('acis_');
    }
    const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const exposition = parsePrometheusText(await res.text());
    const families = Object.fromEntries([...exposition.families.values()].map((family) => [family.name, family.type]));
    expect(families).toMatchObject({
      acis_http_requests_total: 'counter',
      acis_http_request_duration_seconds: 'histogram',
      acis_rate_limited_total: 'counter',
      acis_runs_total: 'counter',
      acis_run_duration_seconds: 'histogram',
      acis_run_first_agent_line_seconds: 'histogram',
      acis_turn_duration_seconds: 'histogram',
      acis_capacity_rejections_total: 'counter',
      acis_run_hold_seconds: 'histogram',
      acis_runs_queued: 'gauge',
      acis_runners: 'gauge',
      acis_runner_pool_size: 'gauge',
      acis_runner_capacity: 'gauge',
      acis_approvals_requested_total: 'counter',
      acis_approvals_resolved_total: 'counter',
      acis_repository_syncs_total: 'counter',
      acis_repository_sync_duration_seconds: 'histogram',
      acis_egress_requests_total: 'counter',
      acis_egress_denials_total: 'counter',
      acis_egress_substitutions_total: 'counter',
      acis_process_cpu_seconds_total: 'counter',
    });
  });

  it('counts API requests by route template, method and status, with a latency histogram', async () => {
    const missingTenant = createIdGenerator()('tenant');
    canaries.add(missingTenant);
    const delta = await across(async () => {
      for (let i = 0; i < 2; i++) expect((await t.request('GET', `/tenants/${user.tenantId}`, { token: key })).status).toBe(200);
      expect((await t.request('GET', `/tenants/${missingTenant}`, { token: key })).status).toBe(404);
      expect((await t.request('GET', `/no-such-route/${CANARY_EXTERNAL_ID}`, { token: key })).status).toBe(404);
    });
    const ok = { method: 'GET', route: '/tenants/:tenant_id', status: '200' };
    const missing = { ...ok, status: '404' };
    expect(delta('acis_http_requests_total', ok)).toBe(2);
    expect(delta('acis_http_request_duration_seconds_count', ok)).toBe(2);
    expect(delta('acis_http_request_duration_seconds_bucket', { ...ok, le: '+Inf' })).toBe(2);
    expect(delta('acis_http_request_duration_seconds_sum', ok)).toBeGreaterThan(0);
    expect(delta('acis_http_requests_total', missing)).toBe(1);
    expect(delta('acis_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
  });

  it('counts a turn, its first agent line and its egress: a request forwarded with a substitution, one refused', async () => {
    const upsert = await t.request('PUT', `/conversations/by-external-id/${CANARY_EXTERNAL_ID}`, {
      token: key,
      body: { user_id: user.userId },
    });
    expect(upsert.status, upsert.text).toBe(201);
    const conversationId: string = upsert.body.id;
    canaries.add(conversationId);
    const put = await t.request('PUT', `/conversations/${conversationId}/secrets`, {
      token: key,
      body: { secrets: { CANARY: CANARY_SECRET } },
    });
    expect(put.status, put.text).toBe(200);
    const command =
      `curl -s -H 'X-Token: {{secret:CANARY}}' http://127.0.0.1:${allowedPort}/allowed ; echo ; ` +
      `curl -s http://127.0.0.1:${unlistedPort}/unlisted ; echo`;
    const delta = await across(async () => {
      const res = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
        token: key,
        body: { content: `[[tool:Bash ${JSON.stringify({ command })}]]` },
      });
      expect(res.status, res.text).toBe(201);
      expect(res.body.status).toBe('completed');
      canaries.add(res.body.id);
    }, runsEnded(1));
    expect(delta('acis_runs_total', { status: 'completed', problem: 'none' })).toBe(1);
    expect(delta('acis_runs_total', { status: 'failed' })).toBe(0);
    expect(delta('acis_run_duration_seconds_count', { status: 'completed' })).toBe(1);
    expect(delta('acis_run_first_agent_line_seconds_count')).toBe(1);
    expect(delta('acis_turn_duration_seconds_count', { status: 'completed' })).toBe(1);
    expect(delta('acis_turn_duration_seconds_sum', { status: 'completed' })).toBeGreaterThan(0);
    expect(delta('acis_egress_requests_total', { outcome: 'forwarded' })).toBe(1);
    expect(delta('acis_egress_requests_total', { outcome: 'destination-refused' })).toBe(1);
    expect(delta('acis_egress_denials_total', { reason: 'destination-refused' })).toBe(1);
    expect(delta('acis_egress_substitutions_total')).toBe(1);
    expect(delta('acis_http_requests_total', { method: 'POST', route: '/conversations/:conversation_id/messages', status: '201' })).toBe(1);
  });

  it('shows runners by state, the queue and the pool; counts an approval, a capacity rejection and a held run', async () => {
    const [parked, rejected, held] = await Promise.all([newConversation(), newConversation(), newConversation()]);
    const input = { reason: 'metrics', requested_items: [] };
    const delta = await across(async () => {
      // A run parked on an approval keeps the node's only runner until the approval is decided.
      const parkedRun = follow(
        await openStream(parked, { content: `[[tool:${APPROVAL_TOOL} ${JSON.stringify(input)}]] [[reply: approved and done]]` }),
        (line) => line.object === 'platform.event' && line.type === 'approval',
      );
      const { approval } = await parkedRun.seen;
      canaries.add(approval.id);
      const whileParked = await scrape();
      expect(samplesOf(whileParked, 'acis_runners', { state: 'busy' }).map((s) => s.value)).toEqual([1]);
      expect(sumOf(whileParked, 'acis_runner_capacity')).toBe(1);
      expect(sumOf(whileParked, 'acis_runner_pool_size')).toBe(0);
      expect(sumOf(whileParked, 'acis_runs_queued')).toBe(0);

      const refused = await t.request('POST', `/conversations/${rejected}/messages`, {
        token: key,
        body: { content: 'hi', on_capacity: 'reject' },
      });
      expect(refused.status).toBe(429);
      expect(problemSlug(refused)).toBe('capacity-exhausted');

      const heldRun = follow(
        await openStream(held, { content: '[[reply: served after waiting]]', on_capacity: 'hold' }),
        (line) => line.type === 'queued',
      );
      await heldRun.seen;
      expect(sumOf(await scrape(), 'acis_runs_queued')).toBe(1);

      const resolved = await t.request('POST', `/approvals/${approval.id}/approve`, {
        token: key,
        body: { signature: hmacAssertion(approval.id, 'approve', approver) },
      });
      expect(resolved.status, resolved.text).toBe(200);
      // On failure the message shows the line the run ended with (an error line carries its problem).
      const [parkedEnd, heldEnd] = [(await parkedRun.done).at(-1), (await heldRun.done).at(-1)];
      expect(parkedEnd, JSON.stringify(parkedEnd)).toMatchObject({ type: 'result', subtype: 'success' });
      expect(heldEnd, JSON.stringify(heldEnd)).toMatchObject({ type: 'result', subtype: 'success' });
    }, runsEnded(2));
    expect(delta('acis_approvals_requested_total')).toBe(1);
    expect(delta('acis_approvals_resolved_total', { outcome: 'approved' })).toBe(1);
    expect(delta('acis_approvals_resolved_total', { outcome: 'denied' })).toBe(0);
    expect(delta('acis_capacity_rejections_total', { on_capacity: 'reject' })).toBe(1);
    expect(delta('acis_run_hold_seconds_count', { outcome: 'served' })).toBe(1);
    expect(delta('acis_run_hold_seconds_sum', { outcome: 'served' })).toBeGreaterThan(0);
    expect(delta('acis_runs_total', { status: 'completed' })).toBe(2);
    expect(sumOf(await scrape(), 'acis_runs_queued')).toBe(0);
    // Two agent runs one after the other on the node's one runner, the second starting its runtime
    // once the first ends: on a loaded 2-core machine that alone took over the default 30 s.
  }, 90_000);

  it('counts an approval that expired, and the run it failed by its problem', async () => {
    const conversationId = await newConversation();
    const input = { reason: 'metrics expiry', requested_items: [], expires_in_seconds: 5 };
    const delta = await across(async () => {
      const run = follow(
        await openStream(conversationId, { content: `[[tool:${APPROVAL_TOOL} ${JSON.stringify(input)}]] [[reply: never]]` }),
        (line) => line.object === 'platform.event' && line.type === 'approval',
      );
      canaries.add((await run.seen).approval.id);
      // Past its deadline on the server's clock: the next expiry sweep ends it.
      t.clock.advance(10_000);
      expect((await run.done).at(-1)?.problem?.type).toMatch(/\/problems\/approval-expired$/);
    }, runsEnded(1));
    expect(delta('acis_approvals_requested_total')).toBe(1);
    expect(delta('acis_approvals_resolved_total', { outcome: 'expired' })).toBe(1);
    expect(delta('acis_runs_total', { status: 'failed', problem: 'approval-expired' })).toBe(1);
    expect(delta('acis_turn_duration_seconds_count', { status: 'aborted' })).toBe(1);
  });

  it('counts repository syncs by outcome, with their duration', async () => {
    const repository = await createGitRepository(repoRoot, unique('skills'), {
      'skills/pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDF files.' }),
    });
    const settled = async (body: object) => {
      const res = await t.request('POST', '/repositories', { token: key, body: { name: unique('repo'), ...body } });
      expect(res.status, res.text).toBe(201);
      canaries.add(res.body.id);
      return (await syncEnded(t, key, res.body.id)).sync.state as string;
    };
    const delta = await across(
      async () => {
        expect(await settled({ repo_url: repository.fileUrl })).toBe('ready');
        expect(await settled({ repo_url: `file://${repoRoot}/does-not-exist` })).toBe('error');
      },
      (d) => d('acis_repository_syncs_total') >= 2,
    );
    expect(delta('acis_repository_syncs_total', { outcome: 'ready' })).toBe(1);
    expect(delta('acis_repository_syncs_total', { outcome: 'error' })).toBe(1);
    expect(delta('acis_repository_sync_duration_seconds_count')).toBe(2);
  });

  it('counts rate-limit refusals by class', async () => {
    const exchange = () =>
      t.request('POST', '/auth/token-exchange', {
        token: key,
        body: { tenant_external_id: user.tenantExternalId, user_external_id: user.userExternalId },
      });
    const delta = await across(async () => {
      const first = await exchange();
      expect(first.status).toBe(200);
      canaries.add(first.body.token);
      expect((await exchange()).status).toBe(429);
    });
    expect(delta('acis_rate_limited_total', { class: 'token-exchange' })).toBe(1);
    expect(delta('acis_http_requests_total', { method: 'POST', route: '/auth/token-exchange', status: '429' })).toBe(1);
  });

  it('never serves an id, external id, token or secret, and labels routes by template only', async () => {
    const last = await scrape();
    for (const text of served) for (const canary of canaries) expect(text.includes(canary), `served ${canary}`).toBe(false);
    for (const sample of samplesOf(last, 'acis_http_requests_total')) {
      expect(sample.labels.route).toMatch(/^(unmatched|\/[a-z0-9/:_.-]*)$/);
      // A path segment is a literal word or a :parameter, never an id.
      expect(sample.labels.route).not.toMatch(/[a-z]{3}_[0-9A-Z]{26}/);
    }
  });
});
