/**
 * The runner (and the Agent SDK in it) inside the bubblewrap sandbox, with its own network namespace: the model
 * stub is reached only through a Unix socket bound into the sandbox. Proves a turn with a Bash tool call runs,
 * that the tool cannot write outside its workspace and HOME, and cannot see the host's /work, other
 * workspaces or the host's network.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { type Bridge, serveUnixToTcp } from '../../runner/bridge.js';
import { isRunnerLine, type RunnerLine } from '../../runner/protocol.js';
import { bwrapCommand, SANDBOX_HOME, SANDBOX_RUN, SANDBOX_WORKSPACE, runnerCommand } from '../../runner/bwrap.js';
import { resultOf, streamedText } from '../helpers/agent-sdk.js';

const appRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FORWARD_PORT = 3128;

let stub: ModelStub;
let bridge: Bridge;
let root: string;
let runDir: string;

beforeAll(async () => {
  // bubblewrap must be able to build a sandbox here; when it cannot, say why rather than skip.
  const probe = spawnSync('bwrap', ['--unshare-all', '--unshare-user', '--ro-bind', '/', '/', '--', 'true'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(`bubblewrap cannot create a sandbox on this machine: ${probe.error?.message ?? probe.stderr.trim()}`);
  }
  stub = await startModelStub();
  root = await mkdtemp(path.join(tmpdir(), 'acis-bwrap-'));
  runDir = path.join(root, 'run');
  await mkdir(runDir);
  bridge = await serveUnixToTcp(path.join(runDir, 'model.sock'), { host: '127.0.0.1', port: stub.port });
});
afterAll(async () => {
  await bridge?.close();
  await stub?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

async function conversation(name: string) {
  const workspace = path.join(root, name, 'workspace');
  const home = path.join(root, name, 'home');
  await mkdir(workspace, { recursive: true });
  await mkdir(home, { recursive: true });
  return { workspace, home };
}

/** Starts the runner in a sandbox for one conversation; `turn` sends a prompt and collects up to its result. */
function startRunner(dirs: { workspace: string; home: string }, env: Record<string, string> = {}, options: { resume?: string } = {}) {
  let resume = options.resume;
  const runner = runnerCommand(appRoot, false);
  const sandbox = bwrapCommand({
    ...dirs,
    runDir,
    runtimeDirs: runner.runtimeDirs,
    env: {
      ANTHROPIC_BASE_URL: 'http://model.invalid',
      ANTHROPIC_UNIX_SOCKET: `${SANDBOX_RUN}/model.sock`,
      ANTHROPIC_API_KEY: 'dummy',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ...env,
    },
    command: runner.command,
  });
  const child: ChildProcessWithoutNullStreams = spawn('bwrap', sandbox.args, { env: sandbox.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));

  return {
    async turn(prompt: string): Promise<SDKMessage[]> {
      child.stdin.write(`${JSON.stringify({ type: 'turn', content: prompt, resume })}\n`);
      resume = undefined;
      const messages: SDKMessage[] = [];
      for (;;) {
        const next = await lines.next();
        if (next.done) throw new Error(`runner ended before a result; stderr: ${stderr}`);
        const message = JSON.parse(next.value) as SDKMessage | RunnerLine;
        if (message.type === 'runner_error') throw new Error(`runner failed: ${message.error}; stderr: ${stderr}`);
        if (isRunnerLine(message)) continue; // the runner's own protocol lines, not agent events
        messages.push(message);
        if (message.type === 'result') return messages;
      }
    },
    async close() {
      child.stdin.end();
      return exited;
    },
  };
}

/** A shell line (node is the one HTTP client every sandbox has) printing whether `url` answers within 2 s. */
function probe(url: string, reachable: string, unreachable: string): string {
  return `node -e 'fetch("${url}", { signal: AbortSignal.timeout(2000) }).then(() => console.log("${reachable}"), () => console.log("${unreachable}"))'`;
}

function toolResultText(messages: SDKMessage[]): string {
  const blocks = messages.flatMap((m) => (m.type === 'user' && Array.isArray(m.message.content) ? m.message.content : []));
  const result = blocks.find((b) => b.type === 'tool_result') as { content: unknown } | undefined;
  if (typeof result?.content !== 'string') throw new Error(`no text tool result in ${JSON.stringify(blocks)}`);
  return result.content;
}

describe('the runner under bubblewrap', () => {
  it('runs a turn with a Bash tool call inside the sandbox, through the socket-only network', async () => {
    const dirs = await conversation('turn');
    const runner = startRunner(dirs);
    const before = stub.requests.length;
    const messages = await runner.turn('[[reply: sandboxed hello]]');
    const second = await runner.turn('Where am I? [[tool:Bash {"command":"id -u; pwd; hostname; echo $HOME; echo made > made.txt"}]]');
    expect(await runner.close()).toBe(0);

    expect(messages[0]).toMatchObject({ type: 'system', subtype: 'init', cwd: SANDBOX_WORKSPACE });
    expect(streamedText(messages)).toBe('sandboxed hello');
    expect(resultOf(messages)).toMatchObject({ subtype: 'success', result: 'sandboxed hello' });
    expect(toolResultText(second)).toBe(`1000\n${SANDBOX_WORKSPACE}\nacis-sandbox\n${SANDBOX_HOME}`);
    expect(resultOf(second)).toMatchObject({ subtype: 'success', session_id: resultOf(messages).session_id });
    expect(await readFile(path.join(dirs.workspace, 'made.txt'), 'utf8')).toBe('made\n');
    // The agent's config and transcript live in the conversation's HOME.
    expect(await readdir(path.join(dirs.home, '.claude', 'projects', '-workspace'))).toContain(`${resultOf(messages).session_id}.jsonl`);
    expect(stub.requests.slice(before).map((r) => `${r.path} ${r.kind} ${r.status}`)).toEqual([
      '/v1/messages agent 200',
      '/v1/messages agent 200',
      '/v1/messages agent 200',
    ]);
  });

  it('resumes the session in a new sandbox given the same HOME (resume on the first turn)', async () => {
    const dirs = await conversation('resume');
    const first = startRunner(dirs);
    const sessionId = resultOf(await first.turn('The password is heron [[reply: noted]]')).session_id;
    expect(await first.close()).toBe(0);

    const second = startRunner(dirs, {}, { resume: sessionId });
    const messages = await second.turn('What was it? [[echo-history]]');
    expect(await second.close()).toBe(0);
    expect(resultOf(messages)).toMatchObject({
      session_id: sessionId,
      result: 'History: 1 earlier user turn: [1] "The password is heron [[reply: noted]]"',
    });
  });

  it('keeps the tool from writing outside its workspace and from seeing /work, other workspaces or the host network', async () => {
    const other = await conversation('other');
    await writeFile(path.join(other.workspace, 'other-secret-7f3a.txt'), 'not yours');
    const dirs = await conversation('isolated');
    const targets = [
      '/escape.txt',
      '/etc/escape.txt',
      '/usr/escape.txt',
      '/opt/acis/node_modules/escape.txt',
      `${SANDBOX_RUN}/escape.txt`,
      path.join(other.workspace, 'escape.txt'),
    ];
    const script = [
      ...targets.map((t) => `(echo x > ${t}) 2>/dev/null && echo "wrote ${t}" || echo "denied ${t}"`),
      'echo inside > inside.txt && echo "wrote workspace"',
      'ls /work >/dev/null 2>&1 && echo "sees /work" || echo "no /work"',
      `ls ${other.workspace} >/dev/null 2>&1 && echo "sees other" || echo "no other"`,
      'find / \\( -path /proc -o -path /sys \\) -prune -o -name "other-secret-*" -print 2>/dev/null',
      probe(`http://127.0.0.1:${stub.port}/`, 'host loopback reachable', 'no host loopback'),
      probe('http://1.1.1.1/', 'internet reachable', 'no internet'),
    ].join('; ');
    const runner = startRunner(dirs);
    const messages = await runner.turn(`[[tool:Bash ${JSON.stringify({ command: script })}]]`);
    expect(await runner.close()).toBe(0);

    expect(toolResultText(messages).split('\n')).toEqual([
      ...targets.map((t) => `denied ${t}`),
      'wrote workspace',
      'no /work',
      'no other',
      'no host loopback',
      'no internet',
    ]);
    expect(await readFile(path.join(dirs.workspace, 'inside.txt'), 'utf8')).toBe('inside\n');
    expect(await readdir(other.workspace)).toEqual(['other-secret-7f3a.txt']);
    expect(await readdir(runDir)).toEqual(['model.sock']);
    await expect(readFile(path.join(appRoot, 'node_modules', 'escape.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('lets TCP-only tools out through a loopback listener bridged to a bound socket', async () => {
    const dirs = await conversation('forward');
    // Here the bridged socket leads to the stub; in the service it leads to the egress proxy.
    const runner = startRunner(dirs, { ACIS_FORWARD: `${FORWARD_PORT}=${SANDBOX_RUN}/model.sock` });
    const before = stub.requests.length;
    const fetchProbe = `node -e 'fetch("http://127.0.0.1:${FORWARD_PORT}/v1/bridged-probe").then((r) => r.text()).then(console.log)'`;
    const messages = await runner.turn(`[[tool:Bash ${JSON.stringify({ command: fetchProbe })}]]`);
    expect(await runner.close()).toBe(0);

    expect(JSON.parse(toolResultText(messages))).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'stub: no route for GET /v1/bridged-probe' },
    });
    expect(stub.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /v1/messages',
      'GET /v1/bridged-probe',
      'POST /v1/messages',
    ]);
  });
});
