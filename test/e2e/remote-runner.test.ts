/**
 * A runner served over TLS, as in a pod: the real runner (`runner/runner.ts`, with ACIS_RUNNER_LISTEN)
 * hosting the real Agent SDK against the model stub, driven by `connectRemoteRunner`. Between the two
 * stands a TCP proxy the test can cut, standing for the network: a connection dropped mid-turn is
 * restored and the turn's events arrive exactly once; a runner left alone past the reconnect window
 * exits and the turn ends `crashed`. Skills, the transcript store, approvals and the workspace archive
 * cross the same connection; a wrong token and a second connection are refused.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { connectRemoteRunner, RunnerRefused } from '../../api-server/sandboxes/remote-runner.js';
import type { AgentEvent, Runner } from '../../api-server/sandboxes/runner.js';
import type { ConversationSessionStore } from '../../api-server/sandboxes/session-store.js';
import type { RunSkill } from '../../api-server/skills/materialise.js';
import { sessionStoreKey } from '../../runner/protocol.js';
import { conversationDirs, sdkEnv } from '../helpers/agent-sdk.js';
import { cuttableNetwork } from '../helpers/cuttable-network.js';
import { type LinkTls, linkTls } from '../helpers/link-tls.js';

const APP_ROOT = path.resolve(import.meta.dirname, '../..');
const TOKEN = 'sbx-token-7d1e0c2b9a4f4e61b3c5';
const logger = pino({ level: 'silent' });

let stub: ModelStub;
let root: string;
let material: LinkTls;
let caFile: string;
const started: RunnerProcess[] = [];
beforeAll(async () => {
  stub = await startModelStub();
  root = await mkdtemp(path.join(tmpdir(), 'acis-remote-runner-'));
  material = await linkTls();
  caFile = path.join(root, 'deployment-ca.crt');
  await writeFile(caFile, material.clientCa);
});

/** What every connection of the API side carries beside the address: the token, the API server's certificate, silence. */
const as = (extra: { token?: string; reconnectSeconds?: number } = {}) => ({
  token: TOKEN,
  clientCertificate: material.apiCertificate,
  logger,
  ...extra,
});
afterAll(async () => {
  for (const runner of started) runner.child.kill('SIGKILL');
  await stub?.stop();
  await rm(root, { recursive: true, force: true });
});

interface RunnerProcess {
  child: ChildProcess;
  port: number;
  cwd: string;
  stderr: string[];
  exited: Promise<number | null>;
}

/** Starts the runner in TCP mode on a free loopback port, from source as the local provider does unsandboxed. */
async function startRunner(name: string, reconnectSeconds = 30): Promise<RunnerProcess> {
  const dirs = await conversationDirs(root, name);
  const tsx = pathToFileURL(path.join(APP_ROOT, 'node_modules/tsx/dist/esm/index.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, path.join(APP_ROOT, 'runner', 'runner.ts')], {
    cwd: dirs.cwd,
    env: {
      ...sdkEnv(stub.url, dirs.home),
      ACIS_SESSION_STORE: '1',
      ACIS_RUNNER_LISTEN: '127.0.0.1:0',
      ACIS_RUNNER_TOKEN: TOKEN,
      ACIS_RUNNER_TLS_CA_FILE: caFile,
      ACIS_RUNNER_RECONNECT_SECONDS: String(reconnectSeconds),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stderr: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr.push(chunk.toString('utf8'));
      const listening = /listening on [^\s]+:(\d+)/.exec(stderr.join(''));
      if (listening) resolve(Number(listening[1]));
    });
    void exited.then((code) => reject(new Error(`runner exited (${code}) before listening: ${stderr.join('')}`)));
  });
  const runner = { child, port, cwd: dirs.cwd, stderr, exited };
  started.push(runner);
  return runner;
}

function memoryStore(): ConversationSessionStore & { entries: Map<string, unknown[]> } {
  const entries = new Map<string, unknown[]>();
  return {
    entries,
    async load(key) {
      return entries.get(sessionStoreKey(key)) ?? null;
    },
    async append(key, more) {
      entries.set(sessionStoreKey(key), [...(entries.get(sessionStoreKey(key)) ?? []), ...more]);
    },
  };
}

const skill = (name: string, extra: Record<string, string> = {}): RunSkill => ({
  name,
  files: [
    { path: 'SKILL.md', data: Buffer.from(`---\nname: ${name}\ndescription: ${name} things.\n---\nUse ${name}.\n`), executable: false },
    ...Object.entries(extra).map(([file, text]) => ({ path: file, data: Buffer.from(text), executable: file.endsWith('.sh') })),
  ],
});

async function turn(runner: Runner, content: string, options: { onEvent?: (event: AgentEvent) => void } = {}) {
  const events: AgentEvent[] = [];
  const outcome = await runner.runTurn({ content }, (event) => {
    events.push(event);
    options.onEvent?.(event);
  });
  return { outcome, events, result: events.find((event) => event.type === 'result') };
}

/** What identifies an event's place in a turn, without its ids and timings. */
const shape = (events: AgentEvent[]) =>
  events.map((event) =>
    [
      event.type,
      event.subtype,
      (event.event as { type?: string } | undefined)?.type,
      (event.event as { delta?: { text?: string } } | undefined)?.delta?.text,
    ].join('/'),
  );

describe('connectRemoteRunner(options) against the runner in TLS mode', () => {
  it('runs turns of a live session with skills and the transcript store crossing the connection', async () => {
    const runnerProcess = await startRunner('turns');
    const runner = await connectRemoteRunner({ id: 'run_turns', host: '127.0.0.1', port: runnerProcess.port, ...as() });
    const store = memoryStore();
    runner.bindSessionStore(store);
    await runner.deliverSkills([skill('heron', { 'tools/run.sh': '#!/bin/sh\necho heron\n' }), skill('osprey')]);
    expect(await readFile(path.join(runnerProcess.cwd, '.claude/skills/heron/tools/run.sh'), 'utf8')).toBe('#!/bin/sh\necho heron\n');
    runner.offerSkills(['heron', 'osprey']);

    const first = await turn(runner, 'Which skills? [[echo-skills]]');
    expect(first.outcome).toEqual({ kind: 'result' });
    expect(first.result).toMatchObject({ subtype: 'success', result: 'Skills: heron, osprey' });
    expect(runner.sessionSkills).toEqual(['heron', 'osprey']);
    const second = await turn(runner, 'And before? [[echo-history]]');
    expect(second.result).toMatchObject({ result: 'History: 1 earlier user turn: [1] "Which skills? [[echo-skills]]"' });
    // The transcript was mirrored through the connection.
    expect([...store.entries.values()].flat().length).toBeGreaterThan(0);

    // Delivering skills again replaces the folder.
    await runner.deliverSkills([skill('osprey')]);
    await expect(readFile(path.join(runnerProcess.cwd, '.claude/skills/heron/SKILL.md'))).rejects.toThrow('ENOENT');
    await runner.kill();
    expect(await runnerProcess.exited).toBe(0);
    expect(runner.alive).toBe(false);
  });

  it('takes a turn sent right behind its skills, unanswered, only once they are written; behind a failed delivery the turn ends crashed', async () => {
    const runnerProcess = await startRunner('skills-ahead');
    const runner = await connectRemoteRunner({ id: 'run_skills_ahead', host: '127.0.0.1', port: runnerProcess.port, ...as() });
    runner.bindSessionStore(memoryStore());
    const delivered = runner.deliverSkills([skill('kestrel')]);
    runner.offerSkills(['kestrel']);
    const first = await turn(runner, 'Which skills? [[echo-skills]]');
    await delivered;
    expect(first.outcome).toEqual({ kind: 'result' });
    expect(first.result).toMatchObject({ subtype: 'success', result: 'Skills: kestrel' });

    // A skill whose name is no folder name cannot be written: the turn behind it does not run.
    const refused = expect(runner.deliverSkills([skill('..')])).rejects.toThrow('is not a folder name');
    const second = await turn(runner, 'Which skills now? [[echo-skills]]');
    await refused;
    expect(second.outcome).toMatchObject({
      kind: 'crashed',
      error: expect.stringContaining('the workspace could not be prepared for the turn'),
    });
    expect(second.result).toBeUndefined();
    expect(await runnerProcess.exited).toBe(1);
    await runner.kill();
  });

  it('keeps its connection token from the agent: no tool the agent runs sees it', async () => {
    const runnerProcess = await startRunner('token-hidden');
    const runner = await connectRemoteRunner({ id: 'run_hidden', host: '127.0.0.1', port: runnerProcess.port, ...as() });
    runner.bindSessionStore(memoryStore());
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, sent literally for the runner's shell to expand
    const command = 'env; echo "token file: ${ACIS_RUNNER_TOKEN_FILE:-none}"';
    const done = await turn(runner, `[[tool:Bash ${JSON.stringify({ command })}]]`);
    const output = JSON.stringify(done.events);
    expect(output).toContain('token file: none');
    expect(output).toContain('HOME=');
    expect(output).not.toContain(TOKEN);
    await runner.kill();
  });

  it('refuses a wrong token and a second connection while one is live, and logs it without the token', async () => {
    const runnerProcess = await startRunner('refusals');
    const options = { id: 'run_refusals', host: '127.0.0.1', port: runnerProcess.port, ...as() };
    await expect(connectRemoteRunner({ ...options, token: 'sbx-token-wrong-0000000000000' })).rejects.toThrow(
      new RunnerRefused('wrong token'),
    );
    const runner = await connectRemoteRunner({ ...options, token: TOKEN });
    await expect(connectRemoteRunner({ ...options, token: TOKEN })).rejects.toThrow(
      'the runner refused the connection: another API connection is live',
    );
    // The first connection is undisturbed.
    expect((await turn(runner, 'Still there? [[reply: yes]]')).result).toMatchObject({ result: 'yes' });
    const log = runnerProcess.stderr.join('');
    expect(log).toMatch(/refused a connection from 127\.0\.0\.1:\d+: wrong token/);
    expect(log).toMatch(/refused a connection from 127\.0\.0\.1:\d+: another API connection is live/);
    expect(log).not.toContain('sbx-token');
    await runner.kill();
  });

  it('restores a connection cut mid-turn: the turn completes with every event once, as on an uncut run', async () => {
    const prompt = `Tell me slowly [[slow: 20]] [[reply: ${'one two three four five six seven eight nine ten '.repeat(3).trim()}]]`;
    const reference = await startRunner('reference');
    const uncut = await connectRemoteRunner({ id: 'run_reference', host: '127.0.0.1', port: reference.port, ...as() });
    const expected = await turn(uncut, prompt);
    await uncut.kill();

    const runnerProcess = await startRunner('cut');
    const net_ = await cuttableNetwork(runnerProcess.port);
    const runner = await connectRemoteRunner({
      id: 'run_cut',
      host: '127.0.0.1',
      port: net_.port,
      ...as(),
      reconnectSeconds: 10,
    });
    let deltas = 0;
    const cutRun = await turn(runner, prompt, {
      onEvent: (event) => {
        // Cut twice: at the first text delta and in the middle of the text.
        if (event.type === 'stream_event' && (event.event as { type?: string }).type === 'content_block_delta') {
          deltas += 1;
          if (deltas === 1 || deltas === 5) net_.cut();
        }
      },
    });
    expect(deltas).toBeGreaterThan(5);
    expect(cutRun.outcome).toEqual({ kind: 'result' });
    expect(shape(cutRun.events)).toEqual(shape(expected.events));
    const uuids = cutRun.events.map((event) => event.uuid).filter(Boolean);
    expect(new Set(uuids).size).toBe(uuids.length);
    expect(runnerProcess.stderr.join('')).toMatch(/API connection from .* resumed/);
    // The next turn on the restored connection works.
    expect((await turn(runner, 'Again [[reply: fine]]')).result).toMatchObject({ result: 'fine' });
    await runner.kill();
    await net_.close();
  });

  it('answers an approval call exactly once when the connection drops while the agent waits for it', async () => {
    const runnerProcess = await startRunner('approval');
    const net_ = await cuttableNetwork(runnerProcess.port);
    const runner = await connectRemoteRunner({
      id: 'run_approval',
      host: '127.0.0.1',
      port: net_.port,
      ...as(),
      reconnectSeconds: 10,
    });
    const asked: unknown[] = [];
    const results: AgentEvent[] = [];
    const input = { reason: 'Deploy', requested_items: [{ kind: 'action', description: 'deploy to prod' }] };
    const outcome = await runner.runTurn(
      {
        content: `Deploy please [[tool:mcp__platform__request_approval ${JSON.stringify(input)}]]`,
        onApprovalRequest: async (given) => {
          asked.push(given);
          // The connection drops while the approver decides; the answer crosses the next one.
          net_.cut();
          return { text: 'Approved by ops.', isError: false };
        },
      },
      (event) => {
        if (event.type === 'result') results.push(event);
      },
    );
    expect(outcome).toEqual({ kind: 'result' });
    expect(results.map((event) => event.result)).toEqual(['Tool mcp__platform__request_approval returned: Approved by ops.']);
    expect(asked).toEqual([input]);
    await runner.kill();
    await net_.close();
  });

  it('exits when left alone past the reconnect window mid-turn, and the turn ends crashed', async () => {
    const runnerProcess = await startRunner('alone', 1);
    const net_ = await cuttableNetwork(runnerProcess.port);
    const runner = await connectRemoteRunner({
      id: 'run_alone',
      host: '127.0.0.1',
      port: net_.port,
      ...as(),
      reconnectSeconds: 1,
    });
    const { outcome } = await turn(runner, 'Long one [[slow: 200]] [[reply: a b c d e f g h i j k l m n o p]]', {
      onEvent: (event) => {
        if (event.type === 'stream_event') {
          net_.refuse = true;
          net_.cut();
        }
      },
    });
    expect(outcome).toMatchObject({ kind: 'crashed' });
    expect(outcome.kind === 'crashed' && outcome.error).toMatch(/^the connection to the runner was lost and not restored within 1 s/);
    expect(runner.alive).toBe(false);
    expect(await runnerProcess.exited).toBe(1);
    expect(runnerProcess.stderr.join('')).toContain('no API connection came back within 1 s');
    await net_.close();
  });

  it('exports the workspace as an archive that another runner imports, within a size cap', async () => {
    const source = await startRunner('export');
    await writeFile(path.join(source.cwd, 'notes.md'), 'kept across runners\n');
    const from = await connectRemoteRunner({ id: 'run_export', host: '127.0.0.1', port: source.port, ...as() });
    await expect(from.exportWorkspace({ maxBytes: 10 })).rejects.toThrow('the workspace archive exceeds 10 bytes');
    const archive = await from.exportWorkspace({ exclude: ['.claude'] });
    expect(archive.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // gzip
    await from.kill();

    const target = await startRunner('import');
    const to = await connectRemoteRunner({ id: 'run_import', host: '127.0.0.1', port: target.port, ...as() });
    await to.importWorkspace(archive);
    expect(await readFile(path.join(target.cwd, 'notes.md'), 'utf8')).toBe('kept across runners\n');
    await expect(to.importWorkspace(Buffer.from('not an archive'))).rejects.toThrow(/unpacking the workspace failed/);
    await to.kill();
  });
});
