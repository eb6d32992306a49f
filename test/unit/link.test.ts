/**
 * The resumable link's parts: line splitting, frames, the outbox, an endpoint's replay and dedupe over
 * connections that drop, and the runner's listener (authentication, one connection at a time, probes,
 * the reconnect window) against the API side's client, over real loopback TLS: client certificates of the
 * deployment CA, proofs bound to the TLS session, and no token on the wire.
 */
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Channel } from '../../runner/channel.js';
import { LineSplitter } from '../../runner/lines.js';
import { LinkRefused, openLinkClient } from '../../runner/link-client.js';
import { type LinkServer, type LinkServerOptions, serveLink } from '../../runner/link-server.js';
import { decodeFrame, encodeControl, encodeData, LinkEndpoint, Outbox, PEER_CLOSED } from '../../runner/link.js';
import { API_SERVER_NAME, ephemeralCertificate, linkProof, sessionBinding } from '../../runner/link-tls.js';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { cuttableNetwork } from '../helpers/cuttable-network.js';
import { type LinkTls, linkTls } from '../helpers/link-tls.js';

describe('LineSplitter', () => {
  it('splits at newlines across chunk boundaries, drops CR and empty lines, and reports an over-long line', () => {
    const lines: string[] = [];
    let overflows = 0;
    const splitter = new LineSplitter(
      10,
      (line) => lines.push(line),
      () => overflows++,
    );
    const input = Buffer.from('one\r\ntwo\n\nthr€e\nfour');
    // Every split point, including inside the multi-byte €.
    for (let at = 0; at < input.length; at++) splitter.push(input.subarray(at, at + 1));
    splitter.push(Buffer.from('\n'));
    expect(lines).toEqual(['one', 'two', 'thr€e', 'four']);
    expect(overflows).toBe(0);
    splitter.push(Buffer.from('0123456789ab'));
    expect(overflows).toBe(1);
  });
});

describe('decodeFrame', () => {
  it('reads data frames and the five controls, and rejects anything else', () => {
    expect(decodeFrame(encodeData(7, '{"type":"x"} y'))).toEqual({ kind: 'data', seq: 7, payload: '{"type":"x"} y' });
    expect(decodeFrame(encodeControl({ type: 'hello', proof: 'p', link: 'l', after: 0 }))).toEqual({
      kind: 'control',
      control: { type: 'hello', proof: 'p', link: 'l', after: 0 },
    });
    expect(decodeFrame('{"type":"welcome","after":2,"proof":"p"}')).toEqual({
      kind: 'control',
      control: { type: 'welcome', after: 2, proof: 'p' },
    });
    expect(decodeFrame('{"type":"ack","seq":3}')).toEqual({ kind: 'control', control: { type: 'ack', seq: 3 } });
    for (const bad of [
      '0 x',
      '-1 x',
      '1x y',
      'x 1',
      '{"type":"ack","seq":-1}',
      '{"type":"hello","proof":"p","link":"","after":0}',
      '{"type":"hello","token":"t","link":"l","after":0}',
      '{"type":"welcome","after":0}',
      '{nope',
      '{"type":"other"}',
      '12345678901234567 x',
    ]) {
      expect(decodeFrame(bad), bad).toEqual({ kind: 'invalid' });
    }
  });
});

describe('Outbox', () => {
  it('numbers lines, replays after a given number, forgets acknowledged ones and refuses gaps', () => {
    const outbox = new Outbox();
    expect([outbox.push('a'), outbox.push('b'), outbox.push('c')]).toEqual([1, 2, 3]);
    expect(outbox.since(1)).toEqual([
      [2, 'b'],
      [3, 'c'],
    ]);
    outbox.acknowledge(2);
    expect(outbox.unacknowledged).toBe(1);
    expect(outbox.since(2)).toEqual([[3, 'c']]);
    expect(outbox.since(3)).toEqual([]);
    expect(outbox.since(1)).toBeUndefined(); // line 2 is gone
    expect(outbox.since(4)).toBeUndefined(); // never sent
    outbox.acknowledge(1); // stale acknowledgement: nothing changes
    expect(outbox.since(2)).toEqual([[3, 'c']]);
  });
});

/** Two connected in-memory channels; `cut` closes both ends like a dropped connection. */
function wirePair() {
  const listeners = { a: [] as Array<(l: string) => void>, b: [] as Array<(l: string) => void> };
  const closed = { a: [] as Array<(r: string) => void>, b: [] as Array<(r: string) => void> };
  let open = true;
  const end = (side: 'a' | 'b'): Channel => {
    const other = side === 'a' ? 'b' : 'a';
    return {
      send: (line) => {
        if (open) for (const l of [...listeners[other]]) l(line);
      },
      onLine: (l) => listeners[side].push(l),
      onClosed: (l) => closed[side].push(l),
      close: (reason = 'closed') => cut(reason),
    };
  };
  const cut = (reason: string) => {
    if (!open) return;
    open = false;
    for (const l of [...closed.a, ...closed.b]) l(reason);
  };
  return { a: end('a'), b: end('b'), cut };
}

describe('LinkEndpoint', () => {
  it('delivers each line once, in order, across a dropped connection: lines sent while detached and unacknowledged ones are replayed', () => {
    const api = new LinkEndpoint();
    const runner = new LinkEndpoint();
    const got: string[] = [];
    api.onLine((line) => got.push(line));
    const first = wirePair();
    api.attach(first.a, runner.lastReceived);
    runner.attach(first.b, api.lastReceived);
    runner.send('one');
    runner.send('two');
    first.cut('dropped');
    expect(api.attached).toBe(false);
    runner.send('three');
    // Reconnection: each side says what it has; nothing was acknowledged, so all but what arrived is replayed.
    const second = wirePair();
    const apiHas = api.lastReceived;
    const runnerHas = runner.lastReceived;
    // (In memory, a line sent before the other end listens is lost; a socket would hold it.)
    api.attach(second.a, runnerHas);
    runner.attach(second.b, apiHas);
    runner.send('four');
    expect(got).toEqual(['one', 'two', 'three', 'four']);
  });

  it('drops a replayed line it already has, closes the connection on a gap, ends on goodbye', () => {
    const endpoint = new LinkEndpoint();
    const got: string[] = [];
    endpoint.onLine((line) => got.push(line));
    const closedWith: string[] = [];
    endpoint.onClosed((reason) => closedWith.push(reason));
    const pair = wirePair();
    endpoint.attach(pair.a, 0);
    pair.b.send(encodeData(1, 'x'));
    pair.b.send(encodeData(1, 'x'));
    expect(got).toEqual(['x']);
    pair.b.send(encodeData(3, 'z'));
    expect(endpoint.attached).toBe(false);
    expect(got).toEqual(['x']);
    const again = wirePair();
    endpoint.attach(again.a, 0);
    again.b.send(encodeControl({ type: 'bye' }));
    expect(closedWith).toEqual([PEER_CLOSED]);
  });

  it('sends heartbeats while connected and drops a connection on which the other side went silent', async () => {
    // The silence limit is many heartbeats long, so an event loop stalled by a busy machine does not
    // drop the connection before the peer has answered twice.
    const endpoint = new LinkEndpoint({ heartbeatMs: 20, silenceMs: 400 });
    const pair = wirePair();
    const heard: string[] = [];
    let answered = 0;
    const threeHeartbeats = new Promise<void>((resolve) =>
      pair.b.onLine((line) => {
        heard.push(line);
        // The peer answers the first two, then goes silent.
        if (answered < 2) {
          answered += 1;
          pair.b.send(encodeControl({ type: 'ack', seq: 0 }));
        }
        if (heard.length === 3) resolve();
      }),
    );
    const dropped = new Promise<string>((resolve) => endpoint.onDetached(resolve));
    endpoint.attach(pair.a, 0);
    await threeHeartbeats;
    expect(heard.slice(0, 3)).toEqual(Array(3).fill(encodeControl({ type: 'ack', seq: 0 })));
    expect(await dropped).toBe('nothing heard for 400 ms');
    expect(endpoint.isEnded).toBe(false);
  });

  it('keeps lines that arrive before anyone listens until the first listener', () => {
    const endpoint = new LinkEndpoint();
    const pair = wirePair();
    endpoint.attach(pair.a, 0);
    pair.b.send(encodeData(1, 'early'));
    const got: string[] = [];
    endpoint.onLine((line) => got.push(line));
    pair.b.send(encodeData(2, 'late'));
    expect(got).toEqual(['early', 'late']);
  });
});

const TOKEN = 'tok_0123456789abcdef0123';

describe('serveLink and openLinkClient over TLS', () => {
  let material: LinkTls;
  beforeAll(async () => {
    material = await linkTls();
  });
  const servers: LinkServer[] = [];
  const logs: string[] = [];
  let busy = false;
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
    logs.length = 0;
    busy = false;
  });

  async function start(overrides: Partial<LinkServerOptions> = {}) {
    let server: LinkServer;
    server = await serveLink({
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      clientCa: material.clientCa,
      reconnectSeconds: 1,
      busy: () => busy,
      // A new client's first line, as the runner's `runner_ready`.
      onNewClient: () => server.channel.send('hello-line'),
      // What a client taking the link over sees after the replay.
      onTakeover: () => server.channel.send('takeover-line'),
      log: (message) => logs.push(message),
      ...overrides,
    });
    servers.push(server);
    return server;
  }

  const connect = (server: LinkServer, options: { token?: string; reconnectSeconds?: number } = {}) =>
    openLinkClient({
      host: '127.0.0.1',
      port: server.address.port,
      token: options.token ?? TOKEN,
      clientCertificate: material.apiCertificate,
      reconnectSeconds: options.reconnectSeconds ?? 1,
    });

  /** The API side's connection options to `port` (a runner's, or the network's in between). */
  const via = (port: number, extra: { takeoverAfter?: number; reconnectSeconds?: number } = {}) => ({
    host: '127.0.0.1',
    port,
    token: TOKEN,
    clientCertificate: material.apiCertificate,
    reconnectSeconds: 5,
    ...extra,
  });

  /**
   * A TLS connection with the API server's certificate; `first` makes its first line from the session.
   * Resolves with the answer's first line once there is one, or with nothing when the runner closes at once.
   */
  function rawExchange(port: number, first: string | ((socket: tls.TLSSocket) => string)): Promise<string[]> {
    return new Promise((resolve) => {
      const socket = tls.connect({ port, host: '127.0.0.1', ...material.apiCertificate(), rejectUnauthorized: false }, () =>
        socket.write(`${typeof first === 'string' ? first : first(socket)}\n`),
      );
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString();
        if (text.includes('\n')) socket.destroy();
      });
      socket.on('close', () => resolve(text.split('\n').filter(Boolean).slice(0, 1)));
      socket.on('error', () => undefined);
    });
  }

  it('welcomes the token, carries lines both ways, and the new client sees its first line first', async () => {
    const server = await start();
    const fromApi = collect(server.channel);
    const client = await connect(server);
    const fromRunner = collect(client);
    client.send('turn');
    server.channel.send('event');
    expect(await fromApi.first(1)).toEqual(['turn']);
    expect(await fromRunner.first(2)).toEqual(['hello-line', 'event']);
    client.close();
  });

  it('refuses a wrong token, a first line that is not a hello, and a second client while one is live, logging none of the tokens', async () => {
    const server = await start();
    await expect(connect(server, { token: 'tok_wrong_wrong_wrong_wrong' })).rejects.toThrow(new LinkRefused('wrong token'));
    expect(await rawExchange(server.address.port, '{"type":"turn","content":"hi"}')).toEqual([
      encodeControl({ type: 'refused', error: 'the first line was not a hello' }),
    ]);
    const first = await connect(server);
    await expect(connect(server)).rejects.toThrow('the runner refused the connection: another API connection is live');
    expect(logs.filter((line) => line.startsWith('refused'))).toHaveLength(3);
    expect(logs.join('\n')).not.toContain('tok_');
    first.close();
  });

  it('lets no client finish its handshake without a certificate of the deployment CA naming the API server', async () => {
    const server = await start();
    const otherCa = await createEphemeralCa('another CA');
    const foreign = await otherCa.issueIdentity({ commonName: API_SERVER_NAME, usages: ['client'], validityMs: 3_600_000 });
    const misnamed = await material.ca.issueIdentity({ commonName: 'acis-egress-proxy', usages: ['client'], validityMs: 3_600_000 });
    // The egress proxy's forged leaves are server certificates: not one a client may present.
    const serverOnly = await material.ca.issueLeaf(API_SERVER_NAME);
    const self = ephemeralCertificate(API_SERVER_NAME);
    const certificates = [
      undefined,
      { cert: foreign.certPem, key: foreign.keyPem },
      { cert: misnamed.certPem, key: misnamed.keyPem },
      { cert: serverOnly.certPem, key: serverOnly.keyPem },
      self,
    ];
    for (const certificate of certificates) {
      const clientCertificate = () => certificate ?? ({} as { cert: string; key: string });
      await expect(openLinkClient({ ...via(server.address.port), clientCertificate })).rejects.toThrow(/could not reach the runner/);
    }
    await eventually(() => logs.filter((line) => line.startsWith('refused')).length === certificates.length);
    expect(logs.filter((line) => line.includes(`does not name ${API_SERVER_NAME}`))).toHaveLength(1);
    // A plaintext client gets nothing of the link.
    const plain = await new Promise<string>((resolve) => {
      const socket = net.connect(server.address.port, '127.0.0.1', () =>
        socket.write(`${encodeControl({ type: 'hello', proof: 'x', link: 'l', after: 0 })}\n`),
      );
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => undefined);
    });
    expect(plain).not.toContain('refused');
    expect(plain).not.toContain('welcome');
    const client = await connect(server);
    client.close();
  });

  it('refuses a hello proof recorded from another TLS session (no replay)', async () => {
    const server = await start();
    let recorded = '';
    const first = await rawExchange(server.address.port, (socket) => {
      recorded = encodeControl({ type: 'hello', proof: linkProof(TOKEN, 'hello', sessionBinding(socket)), link: 'l1', after: 0 });
      return recorded;
    });
    expect(decodeFrame(first[0]!)).toMatchObject({ control: { type: 'welcome', after: 0 } });
    // The same line, byte for byte, on a new session: the proof is bound to the session it was made on.
    servers.splice(0);
    await server.close();
    const second = await start();
    expect(await rawExchange(second.address.port, recorded)).toEqual([encodeControl({ type: 'refused', error: 'wrong token' })]);
    // And the runner's welcome proof is not the hello's: a reflected proof proves nothing.
    expect(
      await rawExchange(second.address.port, (socket) =>
        encodeControl({ type: 'hello', proof: linkProof(TOKEN, 'welcome', sessionBinding(socket)), link: 'l2', after: 0 }),
      ),
    ).toEqual([encodeControl({ type: 'refused', error: 'wrong token' })]);
  });

  it('refuses a runner that cannot prove it holds the token (an impostor at its address)', async () => {
    const impostorCertificate = ephemeralCertificate('acis-runner');
    const welcomes: Array<(socket: tls.TLSSocket, hello: string) => string> = [
      // It guesses.
      () => encodeControl({ type: 'welcome', after: 0, proof: 'A'.repeat(43) }),
      // It proves another token, on this very session.
      (socket) =>
        encodeControl({ type: 'welcome', after: 0, proof: linkProof('tok_another_runner_token', 'welcome', sessionBinding(socket)) }),
      // It reflects the API side's own proof.
      (_socket, hello) =>
        encodeControl({ type: 'welcome', after: 0, proof: (decodeFrame(hello) as { control: { proof: string } }).control.proof }),
    ];
    for (const welcome of welcomes) {
      const impostor = tls.createServer(impostorCertificate, (socket) => {
        socket.once('data', (hello) => socket.write(`${welcome(socket, hello.toString().trim())}\n`));
        socket.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
      await expect(openLinkClient(via((impostor.address() as net.AddressInfo).port))).rejects.toThrow(
        new LinkRefused('the runner did not prove it holds the token: not the runner this side was given'),
      );
      await new Promise<void>((resolve) => impostor.close(() => resolve()));
    }
  });

  it('puts no token and no line in clear on the network between the two sides', async () => {
    const network = await cuttableNetwork();
    const server = await start();
    network.target = server.address.port;
    const fromApi = collect(server.channel);
    const client = await openLinkClient(via(network.port));
    const fromRunner = collect(client);
    client.send('turn with a CLEARTEXT_MARKER');
    server.channel.send('event with a CLEARTEXT_MARKER');
    expect(await fromApi.first(1)).toEqual(['turn with a CLEARTEXT_MARKER']);
    expect(await fromRunner.first(2)).toEqual(['hello-line', 'event with a CLEARTEXT_MARKER']);
    const wire = network.carried();
    expect(wire.length).toBeGreaterThan(0);
    for (const needle of [TOKEN, 'CLEARTEXT_MARKER', 'hello', 'welcome', '"proof"']) expect(wire.includes(needle), needle).toBe(false);
    client.close();
    await network.close();
  });

  it('is not disturbed by a connection that says nothing (a TCP readiness probe)', async () => {
    const server = await start({ helloTimeoutMs: 200 });
    const probe = net.connect(server.address.port, '127.0.0.1');
    await new Promise((resolve) => probe.once('connect', resolve));
    const client = await connect(server); // while the probe is still open
    const silent = net.connect(server.address.port, '127.0.0.1');
    const closedByServer = new Promise((resolve) => silent.once('close', resolve));
    probe.destroy();
    await closedByServer; // the hello timeout closes a silent connection
    expect(await collect(client).first(1)).toEqual(['hello-line']);
    expect(logs.filter((line) => line.startsWith('refused'))).toEqual([]);
    client.close();
  });

  it('restores a dropped connection and replays what the other side missed, both ways, with nothing twice', async () => {
    const proxy = await cuttableNetwork();
    const server = await start();
    proxy.target = server.address.port;
    const fromApi = collect(server.channel);
    const client = await openLinkClient(via(proxy.port));
    const fromRunner = collect(client);
    busy = true;
    for (let i = 0; i < 100; i++) server.channel.send(`event ${i}`);
    proxy.cut();
    for (let i = 100; i < 200; i++) server.channel.send(`event ${i}`);
    client.send('answer');
    expect(await fromRunner.first(201)).toEqual(['hello-line', ...Array.from({ length: 200 }, (_, i) => `event ${i}`)]);
    expect(await fromApi.first(1)).toEqual(['answer']);
    // Nothing more arrives once the runner's next line does: no line came twice.
    server.channel.send('after');
    expect(await fromRunner.first(202)).toEqual(['hello-line', ...Array.from({ length: 200 }, (_, i) => `event ${i}`), 'after']);
    expect(logs.some((line) => line.includes('resumed'))).toBe(true);
    client.close();
    await proxy.close();
  });

  it('lets a client take the link over mid-turn: it gets what its predecessor did not settle, numbered on, and nothing it settled', async () => {
    const proxy = await cuttableNetwork();
    const server = await start({ reconnectSeconds: 5 });
    proxy.target = server.address.port;
    const fromApi = collect(server.channel);
    const first = await openLinkClient(via(proxy.port));
    const fromFirst = collect(first);
    first.holdAcks();
    busy = true;
    first.send('turn');
    for (let i = 0; i < 10; i++) server.channel.send(`event ${i}`);
    expect(await fromFirst.first(11)).toEqual(['hello-line', ...Array.from({ length: 10 }, (_, i) => `event ${i}`)]);
    expect(await fromApi.first(1)).toEqual(['turn']);
    // Lines 1-6 (the hello line, events 0-4) are durable on the first client's side; its replica then dies.
    first.settle(6);
    // The runner drops what was settled and keeps the rest, although the first client received it all.
    while (server.channel.canReplayFrom(5)) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.channel.canReplayFrom(6)).toBe(true);
    proxy.refuse = true;
    proxy.cut();
    await expect(openLinkClient(via(server.address.port))).rejects.toThrow('a turn of another connection is in progress');
    await expect(openLinkClient(via(server.address.port, { takeoverAfter: 40 }))).rejects.toThrow('cannot resume after line 40');
    const second = await openLinkClient(via(server.address.port, { takeoverAfter: 6 }));
    const fromSecond = collect(second);
    expect(await fromSecond.first(6)).toEqual([...Array.from({ length: 5 }, (_, i) => `event ${i + 5}`), 'takeover-line']);
    second.send('answer');
    expect(await fromApi.first(2)).toEqual(['turn', 'answer']);
    server.channel.send('after');
    expect(await fromSecond.first(7)).toEqual([...Array.from({ length: 5 }, (_, i) => `event ${i + 5}`), 'takeover-line', 'after']);
    expect(logs.some((line) => line.includes('took the link over'))).toBe(true);
    first.close();
    second.close();
    await proxy.close();
  });

  it('ends both sides when no connection comes back within the window while busy', async () => {
    const proxy = await cuttableNetwork();
    const server = await start({ reconnectSeconds: 0.5 });
    proxy.target = server.address.port;
    const client = await openLinkClient(via(proxy.port, { reconnectSeconds: 0.5 }));
    const runnerEnded = new Promise<string>((resolve) => server.channel.onClosed(resolve));
    const clientEnded = new Promise<string>((resolve) => client.onClosed(resolve));
    busy = true;
    proxy.refuse = true;
    proxy.cut();
    expect(await runnerEnded).toBe('no API connection came back within 0.5 s');
    expect(await clientEnded).toMatch(/^the connection to the runner was lost and not restored within 0.5 s/);
    await proxy.close();
  });

  it('ends the runner side when the client says goodbye', async () => {
    const server = await start();
    const ended = new Promise<string>((resolve) => server.channel.onClosed(resolve));
    const first = await connect(server);
    first.close();
    // The runner's link ends on goodbye (a runner exits then).
    expect(await ended).toBe(PEER_CLOSED);
    await expect(connect(server)).rejects.toThrow(/could not reach the runner/);
  });
});

async function eventually(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Records a channel's lines; `first(n)` resolves with the lines once there are n, and fails if there are more. */
function collect(channel: Channel) {
  const lines: string[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  channel.onLine((line) => {
    lines.push(line);
    for (const waiter of waiters.filter((w) => lines.length >= w.count)) waiter.resolve();
  });
  return {
    async first(count: number): Promise<string[]> {
      if (lines.length < count) await new Promise<void>((resolve) => waiters.push({ count, resolve }));
      return [...lines];
    },
  };
}
