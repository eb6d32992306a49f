/**
 * The egress proxy wired into agent runs, end to end: the real Agent SDK in bubblewrap runners whose
 * only route out is the server's egress proxy, with local echo servers (plain HTTP, and HTTPS with a
 * CA of its own) standing for the outside world. A canary vaulted at conversation scope must reach the
 * echo servers (header and body) and nothing else: not the agent, the stream, the stored messages, the
 * logs, the database, the runner's files or the model. The model key reaches the model only through
 * the host's gateway; the sandbox holds a placeholder.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { readdir, readFile, stat } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { descendantsOf, processes } from '../helpers/acis-process.js';
import { type EchoResponder, type EchoServers, startEchoServers } from '../helpers/echo-servers.js';
import { isTerminal, parseNdjson, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/** Emits `held` with a function that answers the request, for every request to /held: a run kept alive at will. */
const heldRequests = new EventEmitter();

/** Reflects what arrived, which is what the proxy's masking must catch. */
const reflect: EchoResponder = (request, answer) => {
  const reply = () => answer('application/json', JSON.stringify({ token: request.headers['x-token'] ?? null, body: request.body }));
  if (request.path === '/held') heldRequests.emit('held', reply);
  else reply();
};

const PLATFORM_KEY = `sk-ant-platform-${randomBytes(8).toString('hex')}`;
let echo: EchoServers;
/** What the allowed echo servers received, and what the one off the allow list did. */
const received = () => echo.received.filter((r) => r.port !== unlistedPort);
const unlistedReceived = () => echo.received.filter((r) => r.port === unlistedPort);
let httpPort: number;
let httpsPort: number;
let unlistedPort: number;
let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;
/** Every response body the tests saw, to search for the canary. */
const seen: string[] = [];

beforeAll(async () => {
  echo = await startEchoServers('egress e2e echo CA', { respond: reflect, extraHttpServers: 1 });
  ({ httpPort, httpsPort } = echo);
  [unlistedPort] = echo.extraHttpPorts as [number];
  stub = await startModelStub({ apiKey: PLATFORM_KEY });
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ANTHROPIC_API_KEY: PLATFORM_KEY,
    ACIS_EGRESS_ALLOW: `127.0.0.1:${httpPort},localhost:${httpsPort}`,
    ACIS_EGRESS_EXTRA_CA: echo.caFile,
    ACIS_POOL_SIZE: '1',
    ACIS_MAX_SANDBOXES: '4',
  });
  ({ serviceKey: key } = await t.createIntegration('egress e2e'));
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
});

afterAll(async () => {
  await t?.stop();
  await stub?.stop();
  echo?.close();
});

async function newConversation(): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId } });
  expect(res.status).toBe(201);
  return res.body.id;
}

/** A streamed turn whose agent runs `command` in its Bash tool; every line is kept for the leak search. */
async function bash(conversationId: string, command: string) {
  const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
    token: key,
    body: { content: `[[tool:Bash ${JSON.stringify({ command })}]]` },
  });
  seen.push(res.text);
  expect(res.status, res.text).toBe(200);
  const lines = withoutPings(parseNdjson(res.text));
  const end = lines.find((l) => l.type === 'message_end');
  expect(end, res.text).toBeDefined();
  return { lines, message: end!.message, terminal: lines.at(-1)! };
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

describe('a run calling out through the egress proxy', () => {
  it('substitutes the vaulted canary at egress (HTTP and HTTPS) and nothing else ever holds it', async () => {
    const canary = `canary-${randomBytes(8).toString('hex')}`;
    const conversationId = await newConversation();
    const put = await t.request('PUT', `/conversations/${conversationId}/secrets`, { token: key, body: { secrets: { CANARY: canary } } });
    expect(put.status).toBe(200);
    seen.push(put.text);

    const { message, terminal } = await bash(
      conversationId,
      `curl -s -H 'X-Token: {{secret:CANARY}}' -d 'v={{secret:CANARY}}' http://127.0.0.1:${httpPort}/plain ; echo ; ` +
        `curl -s -H 'X-Token: {{secret:CANARY}}' https://localhost:${httpsPort}/tls ; echo ; echo "files" > note.txt`,
    );
    expect(terminal.type, JSON.stringify(terminal)).toBe('result');
    expect(message.status).toBe('completed');

    // The outside world got the real value, in header and body, over plain HTTP and through TLS.
    const plain = received().find((r) => r.path === '/plain');
    const tls = received().find((r) => r.path === '/tls');
    expect(plain?.headers['x-token']).toBe(canary);
    expect(plain?.body).toBe(`v=${canary}`);
    expect(tls?.headers['x-token']).toBe(canary);
    // Their reflection came back to the agent masked.
    expect(message.content).toContain('{"token":"{{secret:CANARY}}","body":"v={{secret:CANARY}}"}');
    expect(message.content).toContain('{"token":"{{secret:CANARY}}","body":""}');

    // Then everywhere it must not be.
    const history = await t.request('GET', `/conversations/${conversationId}/messages?limit=100`, { token: key });
    const replay = await t.request('GET', `/conversations/${conversationId}/messages/${message.id}/stream?after=0`, { token: key });
    seen.push(history.text, replay.text);
    expect(replay.text).toContain('{{secret:CANARY}}');
    for (const text of seen) expect(text).not.toContain(canary);
    expect(t.logs.join('')).not.toContain(canary);
    expect(JSON.stringify(stub.requests)).not.toContain(canary);
    expect(JSON.stringify(stub.agentRequests())).toContain('{{secret:CANARY}}');

    const db = new pg.Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      const tables = await db.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'",
      );
      expect(tables.rows.length).toBeGreaterThan(5);
      for (const { table_name } of tables.rows) {
        const dump = await db.query<{ row: string }>(`select t::text as row from "${table_name}" t`);
        expect(dump.rows.map((r) => r.row).join('\n'), table_name).not.toContain(canary);
      }
    } finally {
      await db.end();
    }

    const dataDir = t.server.deps.config.dataDir;
    const files = [...(await filesUnder(path.join(dataDir, 'sandboxes'))), ...(await filesUnder(path.join(dataDir, 'conversations')))];
    expect(files.some((f) => f.endsWith(path.join(conversationId, 'workspace', 'note.txt')))).toBe(true);
    for (const file of files) expect((await readFile(file)).toString('latin1'), file).not.toContain(canary);
  });

  it('keeps the platform model key out of the sandbox: the model gets it from the gateway, the agent a placeholder', async () => {
    const conversationId = await newConversation();
    const before = stub.requests.length;
    const { message } = await bash(conversationId, 'printenv ANTHROPIC_API_KEY; printenv HTTPS_PROXY | sed "s/:[^:@]*@/:***@/"');
    expect(message.status).toBe('completed');
    expect(message.content).toContain('{{secret:ANTHROPIC_API_KEY}}');
    expect(message.content).toContain('@127.0.0.1:3128');
    expect(message.content).not.toContain(PLATFORM_KEY);
    // The stub refuses any other key with 401: every call of the turn carried the real one.
    const calls = stub.requests.slice(before);
    expect(calls.filter((r) => r.kind === 'agent').length).toBeGreaterThanOrEqual(2);
    for (const call of calls) expect(call.status).toBe(200);
    expect(t.logs.join('')).not.toContain(PLATFORM_KEY);
    // A pool runner's prewarmed agent runtime made no model call it was refused.
    expect(t.logs.join('')).not.toContain('model call refused');
  });

  it('serves the model socket only to a runner with a run in progress: its credential is refused once the turn ended', async () => {
    const conversationId = await newConversation();
    const { message } = await bash(conversationId, 'printenv ANTHROPIC_CUSTOM_HEADERS');
    expect(message.status).toBe('completed');
    const header = /x-acis-runner: (\S+:\S+)/.exec(message.content)?.[1];
    expect(header, message.content).toBeDefined();
    const socketPath = path.join(t.server.deps.config.dataDir, 'sandboxes', 'run', 'model.sock');
    const call = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          { socketPath, path: '/v1/messages', method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
          (res) => {
            let body = '';
            res.on('data', (chunk) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end('{"model":"x","max_tokens":1,"messages":[]}');
      });
    const before = stub.requests.length;
    const attempts: Record<string, string>[] = [{ 'x-acis-runner': header! }, {}, { 'x-acis-runner': `${header!.split(':')[0]}:wrong` }];
    for (const headers of attempts) {
      const refused = await call(headers);
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    }
    expect(stub.requests.length).toBe(before);
    expect(t.logs.join('')).toContain('model call refused: no run in progress on the calling runner');
  });

  it('aborts the run with missing-secret when a placeholder met only at egress names no vaulted alias', async () => {
    const conversationId = await newConversation();
    const count = received().length;
    // Assembled by the shell, so the send-time scan cannot see it.
    const { lines, message, terminal } = await bash(
      conversationId,
      `curl -s -H "X-Token: {{secret:NO""PE}}" http://127.0.0.1:${httpPort}/nope; sleep 20`,
    );
    expect(lines.at(-2)).toMatchObject({ type: 'message_end', message: { status: 'failed' } });
    expect(isTerminal(terminal)).toBe(true);
    expect(terminal).toMatchObject({ object: 'platform.event', type: 'error', problem: { status: 422 } });
    expect(terminal.problem.type).toMatch(/\/problems\/missing-secret$/);
    expect(terminal.problem.detail).toContain('NOPE');
    expect(message.status).toBe('failed');
    expect(received().length).toBe(count);
    const [assistant] = (await t.request('GET', `/conversations/${conversationId}/messages`, { token: key })).body.data;
    expect(assistant).toMatchObject({ id: message.id, status: 'failed' });

    // The runner was recycled and the conversation is free for the next turn.
    const next = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: again]]' },
    });
    expect(next.status, next.text).toBe(201);
    expect(next.body).toMatchObject({ status: 'completed', content: 'again' });
  });

  it('refuses metadata endpoints, unlisted loopback, wrong credentials and any direct route', async () => {
    const conversationId = await newConversation();
    const { message } = await bash(
      conversationId,
      `curl -s -o /dev/null -w "meta=%{http_code}\\n" http://169.254.169.254/latest/meta-data/ ; ` +
        `curl -s -o /dev/null -w "loop=%{http_code}\\n" http://127.0.0.1:${unlistedPort}/ ; ` +
        `curl -s -o /dev/null -w "forged=%{http_code}\\n" -x http://run_forged:nope@127.0.0.1:3128 http://127.0.0.1:${httpPort}/forged ; ` +
        `curl -s -o /dev/null -w "direct=%{http_code}\\n" --noproxy "*" http://127.0.0.1:${httpPort}/direct`,
    );
    expect(message.status).toBe('completed');
    expect(message.content).toContain('meta=403');
    expect(message.content).toContain('loop=403');
    expect(message.content).toContain('forged=407');
    expect(message.content).toContain('direct=000');
    expect(unlistedReceived()).toEqual([]);
    expect(received().filter((r) => r.path === '/forged' || r.path === '/direct')).toEqual([]);
  });

  it("keeps a runner's egress credential off every command line while its run reaches the proxy with it", async () => {
    const conversationId = await newConversation();
    const held = once(heldRequests, 'held') as Promise<[() => void]>;
    const turn = bash(conversationId, `curl -s http://127.0.0.1:${httpPort}/held`);
    // The request got through the proxy, which let it pass only with the runner's credential.
    const [answer] = await held;
    try {
      const all = await processes();
      const runnerProcesses = descendantsOf(process.pid, all).filter(
        (info) => info.commandLine.startsWith('bwrap ') || info.commandLine.includes('/opt/acis/'),
      );
      expect(runnerProcesses.length).toBeGreaterThan(0);
      const tokens = new Set<string>();
      for (const { pid } of runnerProcesses) {
        const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
        if (!environ) continue;
        // Readable by its owner only, unlike the command line.
        expect((await stat(`/proc/${pid}/environ`)).mode & 0o077).toBe(0);
        for (const variable of environ.split('\0')) {
          const match = /^HTTPS?_PROXY=http:\/\/run_[^:]+:([^@]+)@/i.exec(variable);
          if (match) tokens.add(match[1]!);
        }
      }
      expect(tokens.size).toBeGreaterThan(0);
      for (const token of tokens)
        expect(all.filter((info) => info.commandLine.includes(token)).map((info) => info.commandLine)).toEqual([]);
    } finally {
      answer();
    }
    const { message } = await turn;
    expect(message.status).toBe('completed');
    expect(message.content).toContain('"body":""');
  });

  it('answers 407 to a client with no runner behind it, with or without credentials', async () => {
    const socketPath = path.join(t.server.deps.config.dataDir, 'sandboxes', 'run', 'egress.sock');
    const ask = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ socketPath, method: 'GET', path: `http://127.0.0.1:${httpPort}/runnerless`, headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await ask({})).toBe(407);
    const forged = `Basic ${Buffer.from('run_forged:not-a-token').toString('base64')}`;
    expect(await ask({ 'proxy-authorization': forged })).toBe(407);
    expect(received().filter((r) => r.path === '/runnerless')).toEqual([]);
  });
});
