/**
 * Starting a runner's agent session, with the real Agent SDK against the model stub: from a runtime
 * process prewarmed before any conversation was known (claimed at the first turn), or afresh. Either
 * way the agent is offered exactly the run's skills (none of the runtime's own), and a first turn
 * that resumes a session never takes the spare.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Options, SDKMessage, SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { AgentSessions, skillsOff } from '../../sandbox/agent-session.js';
import { conversationDirs, resultOf, sdkEnv, userMessage } from '../helpers/agent-sdk.js';

let stub: ModelStub;
let root: string;

beforeAll(async () => {
  stub = await startModelStub({ port: 0 });
  root = await mkdtemp(path.join(tmpdir(), 'acis-agent-session-'));
});
afterAll(async () => {
  await stub?.stop();
  await rm(root, { recursive: true, force: true });
});

async function workspace(name: string, skills: string[]) {
  const dirs = await conversationDirs(root, name);
  for (const skill of skills) {
    await mkdir(path.join(dirs.cwd, '.claude', 'skills', skill), { recursive: true });
    await writeFile(path.join(dirs.cwd, '.claude', 'skills', skill, 'SKILL.md'), `---\nname: ${skill}\ndescription: Handles ${skill}.\n---\nUse it.\n`);
  }
  return dirs;
}

function options(home: string): Options {
  return {
    env: sdkEnv(stub.url, home),
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    settingSources: ['project'],
  };
}

/** One turn through a started session: its messages up to the result. */
async function firstTurn(sessions: AgentSessions, cwd: string, text: string, extra: { resume?: string; skills?: string[] } = {}) {
  let push: (message: SDKUserMessage) => void = () => {};
  async function* prompt(): AsyncGenerator<SDKUserMessage> {
    yield await new Promise<SDKUserMessage>((resolve) => {
      push = resolve;
    });
  }
  const { session, messages: stream, prewarmed } = await sessions.start({ cwd, ...extra }, prompt());
  push(userMessage(text));
  const messages: SDKMessage[] = [];
  for await (const message of stream) {
    messages.push(message);
    if (message.type === 'result') break;
  }
  session.close();
  return { prewarmed, result: resultOf(messages), first: messages[0] };
}

describe('agent sessions', () => {
  it('a prewarmed runtime is claimed by the first turn and offers exactly the run\'s skills', async () => {
    const { cwd, home } = await workspace('prewarmed', ['pdf', 'docx']);
    const logs: string[] = [];
    const sessions = new AgentSessions(() => options(home), (line) => logs.push(line));
    sessions.prewarm();
    const turn = await firstTurn(sessions, cwd, 'hello [[echo-skills]]', { skills: ['pdf'] });
    expect(turn.prewarmed, logs.join('\n')).toBe(true);
    expect(turn.result).toMatchObject({ subtype: 'success', result: 'Skills: pdf' });
    // The stream starts as a fresh session's does: nothing the claim caused comes before `init`.
    expect(turn.first).toMatchObject({ type: 'system', subtype: 'init' });
  });

  it('a first turn that resumes a session leaves the spare and starts afresh, with the history and the skills filter', async () => {
    const { cwd, home } = await workspace('resumed', ['pdf', 'docx']);
    const earlier = await firstTurn(new AgentSessions(() => options(home), () => undefined), cwd, 'remember me', { skills: ['docx'] });
    expect(earlier.prewarmed).toBe(false);
    const sessions = new AgentSessions(() => options(home), () => undefined);
    sessions.prewarm();
    const turn = await firstTurn(sessions, cwd, 'again [[echo-history]] [[echo-skills]]', { resume: earlier.result.session_id, skills: ['docx'] });
    expect(turn.prewarmed).toBe(false);
    expect(turn.result).toMatchObject({ subtype: 'success' });
    expect((turn.result as { result?: string }).result).toBe('History: 1 earlier user turn: [1] "remember me"\nSkills: docx');
  });

  it('without a prewarm, the first turn starts the runtime with the skills filter', async () => {
    const { cwd, home } = await workspace('fresh', ['pdf', 'docx']);
    const turn = await firstTurn(new AgentSessions(() => options(home), () => undefined), cwd, '[[echo-skills]]', { skills: ['docx', 'pdf'] });
    expect(turn).toMatchObject({ prewarmed: false, result: { result: 'Skills: docx, pdf' } });
  });

  it('turns off every listed command but the offered skills; with none named, Claude Code\'s own', () => {
    const commands = [{ name: 'pdf' }, { name: 'docx' }, { name: 'doctor', builtin: true }, { name: 'compact', builtin: true }];
    expect(skillsOff(commands, ['pdf'])).toEqual({ docx: 'off', doctor: 'off', compact: 'off' });
    expect(skillsOff(commands, undefined)).toEqual({ doctor: 'off', compact: 'off' });
  });
});
