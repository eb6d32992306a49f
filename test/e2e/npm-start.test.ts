/**
 * What `npm start` runs: the compiled build (`npm run build`, then `node dist/cli/acis.js
 * serve`) on the embedded database with nothing configured but the model endpoint, a bootstrap key
 * and an admin token. Its runners start from the compiled runner (dist/runner/runner.js), a path
 * the source-run suites never take: a message with a tool call, an approval raised through the
 * platform tool and approved, and the reply in history.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { cleanEnv, commandLines, ROOT, type ServingAcis, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { hmacAssertion } from '../helpers/approver.js';
import { type Line, readLines, withoutPings } from '../helpers/ndjson.js';

const BOOTSTRAP_KEY = 'sk_int_npmstartsmoketest0123456789';
const ADMIN_TOKEN = 'npm-start-admin-token-0123';
const TOOL = 'mcp__platform__request_approval';

let stub: ModelStub;
let dataDir: string;
let server: ServingAcis;

beforeAll(async () => {
  await promisify(execFile)(path.join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json'], { cwd: ROOT });
  stub = await startModelStub();
  dataDir = await mkdtemp(path.join(tmpdir(), 'acis-npm-start-'));
  server = await serveAcis(
    cleanEnv({
      ACIS_DATA_DIR: dataDir,
      ACIS_BOOTSTRAP_SERVICE_KEY: BOOTSTRAP_KEY,
      ACIS_ADMIN_TOKEN: ADMIN_TOKEN,
      ANTHROPIC_BASE_URL: stub.url,
      ACIS_PING_INTERVAL_MS: '300',
    }),
    { compiled: true },
  );
}, 180_000);

afterAll(async () => {
  if (server) await stopAcis(server);
  await stub?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function api(method: string, urlPath: string, token: string, body?: unknown) {
  const res = await fetch(`${server.url}${urlPath}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

describe('npm start (the compiled build on the embedded database)', () => {
  it('runs an agent with a tool call and an approval through the compiled runner', async () => {
    const tenant = await api('PUT', '/tenants/by-external-id/npm-start:tenant', BOOTSTRAP_KEY, { settings: { filler_enabled: false } });
    expect(tenant.status, tenant.text).toBe(201);
    const role = await api('POST', `/tenants/${tenant.body.id}/roles`, BOOTSTRAP_KEY, { name: 'member', skill_access: { mode: 'all' } });
    const user = await api('PUT', `/tenants/${tenant.body.id}/users/by-external-id/npm-start:user`, BOOTSTRAP_KEY, {
      role_id: role.body.id,
    });
    expect(user.status, user.text).toBe(201);
    const approver = await api('POST', `/admin/tenants/${tenant.body.id}/approver-keys`, ADMIN_TOKEN, { algorithm: 'hmac-sha256' });
    expect(approver.status, approver.text).toBe(201);
    const conversation = await api('POST', '/conversations', BOOTSTRAP_KEY, { user_id: user.body.id });
    expect(conversation.status, conversation.text).toBe(201);

    const content =
      `[[tool:Bash ${JSON.stringify({ command: 'echo compiled runner' })}]] ` +
      `[[tool:${TOOL} ${JSON.stringify({ reason: 'smoke', requested_items: [{ kind: 'action', description: 'finish' }] })}]]`;
    const response = await fetch(`${server.url}/conversations/${conversation.body.id}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${BOOTSTRAP_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content }),
    });
    expect(response.status).toBe(200);
    let markParked: (approval: any) => void = () => {};
    const parked = new Promise<any>((resolve) => (markParked = resolve));
    const lines = readLines(response, (line: Line) => {
      if (line.type === 'approval') markParked(line.approval);
    });
    const approval = await parked;
    expect((await commandLines()).some((line) => line.includes('dist/runner/runner.js'))).toBe(true);

    const approved = await api('POST', `/approvals/${approval.id}/approve`, BOOTSTRAP_KEY, {
      signature: hmacAssertion(approval.id, 'approve', approver.body),
    });
    expect(approved.status, approved.text).toBe(200);

    const visible = withoutPings(await lines);
    // On failure the message shows the line the run ended with (an error line carries its problem)
    // and what the server logged (warnings and errors).
    const ending = `${JSON.stringify(visible.at(-1))}\n${server.output()}`;
    expect(visible.map((l) => l.type).slice(-2), ending).toEqual(['message_end', 'result']);
    const reply = visible.at(-2)!.message;
    expect(reply.status).toBe('completed');
    const bashResult = reply.parts.find((part: any) => part.type === 'tool_result' && JSON.stringify(part).includes('compiled runner'));
    expect(bashResult, JSON.stringify(reply.parts)).toBeDefined();
    expect(reply.content).toContain(`Tool ${TOOL} returned: Approved by approver_key:${approver.body.id}.`);
    const history = await api('GET', `/conversations/${conversation.body.id}/messages`, BOOTSTRAP_KEY);
    expect(history.body.data[0]).toMatchObject({ id: reply.id, status: 'completed' });
  });
});
