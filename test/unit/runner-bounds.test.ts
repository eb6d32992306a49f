/**
 * A hostile runner cannot make the API server hold without bound: `connectRemoteRunner` (the API
 * side of the runner link) against a runner that floods, over real loopback TCP. One huge line, a
 * turn's worth of lines past the buffered bound, a workspace the runner never reads, and calls it
 * never lets finish: each drops the runner (the turn ends `crashed` saying why), and the process's
 * memory (heap plus buffers, sampled at every write of the flood) stays within a few times the bound.
 * And a local runner process (over stdio) writing one endless line is killed the same way.
 */
import { randomBytes } from 'node:crypto';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalRunner } from '../../api-server/sandboxes/local/runner.js';
import { connectRemoteRunner } from '../../api-server/sandboxes/remote-runner.js';
import type { AgentEvent, Runner, RunnerBounds } from '../../api-server/sandboxes/runner.js';
import { HOSTILE_RUNNER_TOKEN, type HostileConnection, type HostileRunner, startHostileRunner } from '../helpers/hostile-runner.js';
import { type LinkTls, linkTls } from '../helpers/link-tls.js';

const MiB = 1024 * 1024;
const BOUNDS: RunnerBounds = { maxLineBytes: 1 * MiB, maxBufferedBytes: 8 * MiB };
/** What the flood would send if never cut off: far past the bounds, and past the old 64 MiB line limit. */
const FLOOD_BYTES = 96 * MiB;
/** The most the process may grow by while a runner floods it under BOUNDS. */
const MAX_GROWTH = 48 * MiB;

let gc: () => void;
let material: LinkTls;
beforeAll(async () => {
  v8.setFlagsFromString('--expose-gc');
  gc = runInNewContext('gc') as () => void;
  material = await linkTls();
});

let hostile: HostileRunner | undefined;
let runner: Runner | undefined;
afterEach(async () => {
  await runner?.kill();
  await hostile?.close();
  runner = undefined;
  hostile = undefined;
});

const used = () => {
  const memory = process.memoryUsage();
  return memory.heapUsed + memory.arrayBuffers;
};

/** Starts the hostile runner and connects to it; the peak is the most the process grew by at any write. */
async function flooded(scenario: (connection: HostileConnection) => Promise<void>) {
  gc();
  const baseline = used();
  const memory = { baseline, peak: 0 };
  hostile = await startHostileRunner(scenario, () => {
    memory.peak = Math.max(memory.peak, used() - baseline);
  });
  runner = await connectRemoteRunner({
    id: 'sbx-hostile',
    host: '127.0.0.1',
    port: hostile.port,
    token: HOSTILE_RUNNER_TOKEN,
    clientCertificate: material.apiCertificate,
    logger: pino({ level: 'silent' }),
    reconnectSeconds: 1,
    bounds: BOUNDS,
  });
  return { runner, memory, finished: hostile.finished };
}

function report(name: string, memory: { baseline: number; peak: number }, sent: number) {
  gc();
  const after = used() - memory.baseline;
  console.log(
    `${name}: runner sent ${(sent / MiB).toFixed(1)} MiB before it was cut off; peak growth ${(memory.peak / MiB).toFixed(1)} MiB, after gc ${(after / MiB).toFixed(1)} MiB`,
  );
  expect(memory.peak).toBeLessThan(MAX_GROWTH);
  expect(after).toBeLessThan(MAX_GROWTH / 4);
}

describe('connectRemoteRunner against a runner that floods', () => {
  it('drops a runner whose line grows past maxLineBytes, holding no more than the bound', async () => {
    let sent = 0;
    const { runner, memory, finished } = await flooded(async (c) => {
      await c.received('"type":"turn"');
      c.stopReading();
      const piece = 'x'.repeat(MiB);
      await c.write('2 {"type":"assistant","text":"');
      while (c.sent < FLOOD_BYTES && (await c.write(piece)));
      sent = c.sent;
      await c.write('"}\n');
    });
    const events: AgentEvent[] = [];
    const outcome = await runner.runTurn({ content: 'hello' }, (event) => events.push(event));
    expect(outcome).toEqual({ kind: 'crashed', error: expect.stringMatching(/^the runner was dropped: a line exceeded the length limit/) });
    expect(events).toEqual([]);
    expect(runner.alive).toBe(false);
    await finished;
    report('one huge line', memory, sent);
    expect(sent).toBeLessThan(FLOOD_BYTES / 4);
  });

  it("drops a runner whose turn's lines pass maxBufferedBytes while it reads nothing", async () => {
    let sent = 0;
    const { runner, memory, finished } = await flooded(async (c) => {
      await c.received('"type":"turn"');
      c.stopReading();
      const text = 'y'.repeat(1024);
      let seq = 2;
      while (c.sent < FLOOD_BYTES) {
        const batch: string[] = [];
        for (let i = 0; i < 256; i++)
          batch.push(`${seq++} ${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text }] } })}\n`);
        if (!(await c.write(batch.join('')))) break;
      }
      sent = c.sent;
      await c.line(seq, { type: 'result', subtype: 'success' });
    });
    // The run keeps every line of its turn (for the clients following it): so does this listener.
    const events: AgentEvent[] = [];
    const outcome = await runner.runTurn({ content: 'hello' }, (event) => events.push(event));
    expect(outcome).toEqual({ kind: 'crashed', error: `the runner was dropped: it made this side hold more than ${8 * MiB} bytes` });
    expect(events.length).toBeGreaterThan(0);
    expect(events.length).toBeLessThan((8 * MiB) / 1024);
    await finished;
    report('many lines in a turn', memory, sent);
    expect(sent).toBeLessThan(FLOOD_BYTES / 4);
  });

  it('drops a runner that leaves what it is sent unread, failing the call that sent it', async () => {
    const archive = randomBytes(16 * MiB);
    const { runner, memory } = await flooded(async (c) => c.stopReading());
    await expect(runner.importWorkspace(archive)).rejects.toThrow(/^the runner was dropped: the peer left too many bytes unread/);
    expect(runner.alive).toBe(false);
    memory.peak = Math.max(memory.peak, used() - memory.baseline);
    report('a workspace never read', memory, 0);
  });

  it('drops a runner that opens more calls than the runtime ever has in flight', async () => {
    const { runner } = await flooded(async (c) => {
      await c.received('"type":"turn"');
      c.stopReading();
      const calls: string[] = [];
      for (let id = 1; id <= 200; id++) {
        calls.push(
          `${id + 1} ${JSON.stringify({ type: 'runner_session_load', request_id: id, key: { projectKey: 'p', sessionId: 's' } })}\n`,
        );
      }
      await c.write(calls.join(''));
      await c.line(202, { type: 'result', subtype: 'success' });
    });
    runner.bindSessionStore({
      load: async () => [{ type: 'user', text: 'z'.repeat(64 * 1024) }],
      append: async () => {},
    });
    const outcome = await runner.runTurn({ content: 'hello' }, () => {});
    expect(outcome).toEqual({ kind: 'crashed', error: 'the runner was dropped: it has more than 64 calls in flight' });
  });
});

describe('LocalRunner (over stdio) against a runner process that floods', () => {
  it('kills a runner whose line grows past maxLineBytes, and its turn ends crashed saying why', async () => {
    // Says it is up, then writes one line without end once the turn arrives.
    const script = `
      process.stdout.write('{"type":"runner_ready"}\\n');
      process.stdin.once('data', () => {
        const piece = 'x'.repeat(65536);
        process.stdout.write('{"type":"assistant","text":"');
        const more = () => { while (process.stdout.write(piece)); process.stdout.once('drain', more); };
        more();
      });
    `;
    const local = new LocalRunner(
      'run_hostile',
      { file: process.execPath, args: ['-e', script], env: { PATH: process.env.PATH ?? '' }, cwd: process.cwd() },
      pino({ level: 'silent' }),
      BOUNDS,
    );
    runner = local;
    await local.ready;
    const outcome = await local.runTurn({ content: 'hello' }, () => {});
    expect(outcome).toEqual({ kind: 'crashed', error: expect.stringMatching(/^the runner was dropped: a line exceeded the length limit/) });
    await local.exit;
    expect(local.alive).toBe(false);
  });
});
