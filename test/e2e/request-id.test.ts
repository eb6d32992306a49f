/**
 * One request id through a turn (local provider): the caller's `X-Request-Id` is echoed, and every log
 * line about the request and about the run it started (also those written after the response was
 * answered) carries it, as do the egress proxy's lines for the run's calls out and the model gateway's
 * for its model calls. An id that is too long, or holds anything but `[A-Za-z0-9._:-]`, is replaced
 * by one of ours and never reaches a log line.
 * The real Agent SDK in a bubblewrap runner, against the model stub; a local echo server stands for the
 * world the agent calls through the egress proxy.
 */
import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { isTerminal, parseNdjson, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;
let echo: Server;
let echoPort: number;

beforeAll(async () => {
  echo = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoPort = (echo.address() as AddressInfo).port;
  stub = await startModelStub();
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_EGRESS_ALLOW: `127.0.0.1:${echoPort}`,
    ACIS_POOL_SIZE: '1',
    ACIS_MAX_SANDBOXES: '2',
  });
  ({ serviceKey: key } = await t.createIntegration('request id e2e'));
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
  echo?.close();
});

/** The server's log lines as objects. */
const logLines = (): Array<Record<string, unknown>> => t.logs.map((line) => JSON.parse(line) as Record<string, unknown>);

describe('X-Request-Id through a turn', () => {
  it('is echoed, and names the request, its run (after the response too) and the egress proxy’s lines of the run', async () => {
    const requestId = 'host-7f3a:turn.1_a';
    const conversationId = (await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId } })).body.id;
    const command = `curl -s http://127.0.0.1:${echoPort}/out`;
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: key,
      headers: { 'X-Request-Id': requestId },
      body: { content: `[[tool:Bash ${JSON.stringify({ command })}]]` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe(requestId);
    const lines = withoutPings(parseNdjson(res.text));
    expect(lines.filter(isTerminal)).toHaveLength(1);
    expect(lines.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    const messageId = res.headers.get('x-service-message-id');

    // The run's last line is written once its outcome is counted, which may be just after the stream ended.
    await vi.waitFor(() => expect(logLines().some((l) => l.msg === 'run ended' && l.message_id === messageId)).toBe(true));
    const ours = logLines().filter((l) => l.request_id === requestId);
    expect(ours).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ msg: 'request', method: 'POST', path: `/conversations/${conversationId}/messages`, status: 200 }),
        expect.objectContaining({ msg: 'run started', message_id: messageId, conversation_id: conversationId }),
        expect.objectContaining({ msg: 'run ended', message_id: messageId, status: 'completed' }),
        expect.objectContaining({ msg: 'egress request', component: 'egress', destination: `127.0.0.1:${echoPort}`, status: 200 }),
        expect.objectContaining({ msg: 'model call', component: 'model-gateway', status: 200 }),
      ]),
    );
    // The access line is written when the response starts; the run's end comes after it, still with the id.
    const written = logLines();
    const at = (msg: string) => written.findIndex((l) => l.request_id === requestId && l.msg === msg);
    expect(at('run ended')).toBeGreaterThan(at('request'));
    // Every line that names the run names its request.
    const ofRun = written.filter((l) => l.message_id === messageId);
    expect(ofRun.length).toBeGreaterThanOrEqual(2);
    for (const line of ofRun) expect(line.request_id, JSON.stringify(line)).toBe(requestId);
  });

  it('is minted (req_…) when the caller sends none, and differs per request', async () => {
    const first = await t.request('GET', '/integration', { token: key });
    const second = await t.request('GET', '/integration', { token: key });
    expect(first.headers.get('x-request-id')).toMatch(/^req_[0-9A-Z]+$/);
    expect(second.headers.get('x-request-id')).toMatch(/^req_[0-9A-Z]+$/);
    expect(first.headers.get('x-request-id')).not.toBe(second.headers.get('x-request-id'));
  });
});

describe('a hostile X-Request-Id', () => {
  it.each([
    ['too long', 'x'.repeat(129)],
    ['with a space', 'req forged'],
    ['with a quote', 'req"},"level":60,"msg":"forged'],
    ['with a tab', 'req\tforged'],
  ])('%s is replaced by one of ours and never logged', async (_name, hostile) => {
    const res = await t.request('GET', '/integration', { token: key, headers: { 'X-Request-Id': hostile } });
    expect(res.status).toBe(200);
    const minted = res.headers.get('x-request-id');
    expect(minted).toMatch(/^req_[0-9A-Z]+$/);
    expect(logLines()).toContainEqual(expect.objectContaining({ msg: 'request', request_id: minted, path: '/integration' }));
    expect(t.logs.join('\n')).not.toContain(hostile.includes('forged') ? 'forged' : hostile);
  });

  it.each([
    ['non-ASCII (UTF-8 bytes)', Buffer.from('req-ünïcødé', 'utf8')],
    ['a line break', Buffer.from('req-1\nforged-line')],
    ['a carriage return', Buffer.from('req-1\rforged-line')],
    ['a control character', Buffer.from('req-1\x01forged-line')],
  ])('with %s is replaced by one of ours, or the request refused with one of ours; nothing of it is logged', async (_name, hostile) => {
    const head = Buffer.concat([
      Buffer.from(`GET /integration HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\nX-Request-Id: `),
      hostile,
      Buffer.from('\r\n\r\n'),
    ]);
    const response = await rawExchange(head);
    expect(response).toMatch(/^HTTP\/1\.1 (200|400) /);
    expect(/^x-request-id: (.*)$/im.exec(response)?.[1]?.trim()).toMatch(/^req_[0-9A-Z]+$/);
    const logs = t.logs.join('\n');
    expect(logs).not.toContain('forged');
    expect(logs).not.toContain('nïc');
  });
});

/** Writes `head` on a raw socket and reads until the server closes it. */
async function rawExchange(head: Buffer): Promise<string> {
  const socket = net.connect(t.server.port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const closed = new Promise<void>((resolve, reject) => {
    socket.once('close', () => resolve());
    socket.once('error', reject);
  });
  socket.write(head);
  await closed;
  return Buffer.concat(chunks).toString('latin1');
}
