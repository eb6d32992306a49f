/**
 * Starting a runner's agent session, with the real Agent SDK against the model stub: in a runtime
 * process prewarmed and bound to the workspace before any conversation was known, or afresh. Either
 * way the agent is offered exactly the run's skills (none of the runtime's own), even when they are
 * delivered after the binding; a first turn that resumes a session, or finds the workspace holding
 * more than skills, never takes the prewarmed session.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Options, SDKMessage, SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { AgentSessions, skillOverrides } from '../../runner/agent-session.js';
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
  await deliver(dirs.cwd, skills);
  return dirs;
}

/** Writes skills into the workspace as the runner does when the server delivers them. */
async function deliver(cwd: string, skills: string[]) {
  for (const skill of skills) {
    await mkdir(path.join(cwd, '.claude', 'skills', skill), { recursive: true });
    await writeFile(
      path.join(cwd, '.claude', 'skills', skill, 'SKILL.md'),
      `---\nname: ${skill}\ndescription: Handles ${skill}.\n---\nUse it.\n`,
    );
  }
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
  it('a runtime prewarmed and bound to the workspace takes the first turn, offering exactly the skills delivered after the binding', async () => {
    const { cwd, home } = await workspace('prewarmed', []);
    const logs: string[] = [];
    const sessions = new AgentSessions(
      () => options(home),
      (line) => logs.push(line),
    );
    await sessions.prewarm(cwd);
    await deliver(cwd, ['pdf', 'docx']);
    const turn = await firstTurn(sessions, cwd, 'hello [[echo-skills]]', { skills: ['pdf'] });
    expect(turn.prewarmed, logs.join('\n')).toBe(true);
    expect(turn.result).toMatchObject({ subtype: 'success', result: 'Skills: pdf' });
    // The stream starts as a fresh session's does: nothing the binding caused comes before `init`.
    expect(turn.first).toMatchObject({ type: 'system', subtype: 'init' });
  });

  it("a run without skills goes straight to the bound session, which offers none of the runtime's own", async () => {
    const { cwd, home } = await workspace('prewarmed-no-skills', []);
    const sessions = new AgentSessions(
      () => options(home),
      () => undefined,
    );
    await sessions.prewarm(cwd);
    const turn = await firstTurn(sessions, cwd, 'hello [[echo-skills]]', { skills: [] });
    expect(turn).toMatchObject({ prewarmed: true, result: { subtype: 'success', result: 'Skills: none.' } });
  });

  it('a workspace holding more than skills at the first turn (what the binding did not see) starts the runtime afresh', async () => {
    const { cwd, home } = await workspace('prewarmed-stale', []);
    const logs: string[] = [];
    const sessions = new AgentSessions(
      () => options(home),
      (line) => logs.push(line),
    );
    await sessions.prewarm(cwd);
    await deliver(cwd, ['pdf']);
    await writeFile(path.join(cwd, 'notes.txt'), 'an earlier run left this\n');
    const turn = await firstTurn(sessions, cwd, '[[echo-skills]]', { skills: ['pdf'] });
    expect(turn).toMatchObject({ prewarmed: false, result: { subtype: 'success', result: 'Skills: pdf' } });
  });

  it('a HOME inside the workspace (as in a runner pod), there since the binding, does not stop the bound session from taking the first turn', async () => {
    const { cwd } = await workspace('prewarmed-home-inside', []);
    const home = path.join(cwd, '.home');
    await mkdir(home, { recursive: true });
    const logs: string[] = [];
    const sessions = new AgentSessions(
      () => options(home),
      (line) => logs.push(line),
    );
    await sessions.prewarm(cwd);
    await deliver(cwd, ['pdf']);
    const turn = await firstTurn(sessions, cwd, '[[echo-skills]]', { skills: ['pdf'] });
    expect(turn, logs.join('\n')).toMatchObject({ prewarmed: true, result: { subtype: 'success', result: 'Skills: pdf' } });
  });

  it('a first turn in another folder than the one bound starts the runtime afresh there', async () => {
    const bound = await workspace('prewarmed-bound-here', []);
    const other = await workspace('prewarmed-used-there', ['pdf']);
    const sessions = new AgentSessions(
      () => options(bound.home),
      () => undefined,
    );
    await sessions.prewarm(bound.cwd);
    const turn = await firstTurn(sessions, other.cwd, '[[echo-skills]]', { skills: ['pdf'] });
    expect(turn).toMatchObject({ prewarmed: false, result: { subtype: 'success', result: 'Skills: pdf' } });
  });

  it('a first turn that resumes a session leaves the spare and starts afresh, with the history and the skills filter', async () => {
    const { cwd, home } = await workspace('resumed', ['pdf', 'docx']);
    const earlier = await firstTurn(
      new AgentSessions(
        () => options(home),
        () => undefined,
      ),
      cwd,
      'remember me',
      { skills: ['docx'] },
    );
    expect(earlier.prewarmed).toBe(false);
    const sessions = new AgentSessions(
      () => options(home),
      () => undefined,
    );
    await sessions.prewarm(cwd);
    const turn = await firstTurn(sessions, cwd, 'again [[echo-history]] [[echo-skills]]', {
      resume: earlier.result.session_id,
      skills: ['docx'],
    });
    expect(turn.prewarmed).toBe(false);
    expect(turn.result).toMatchObject({ subtype: 'success' });
    expect((turn.result as { result?: string }).result).toBe('History: 1 earlier user turn: [1] "remember me"\nSkills: docx');
  });

  it('without a prewarm, the first turn starts the runtime with the skills filter', async () => {
    const { cwd, home } = await workspace('fresh', ['pdf', 'docx']);
    const turn = await firstTurn(
      new AgentSessions(
        () => options(home),
        () => undefined,
      ),
      cwd,
      '[[echo-skills]]',
      { skills: ['docx', 'pdf'] },
    );
    expect(turn).toMatchObject({ prewarmed: false, result: { result: 'Skills: docx, pdf' } });
  });

  it("turns every listed command but the offered skills off, and those on; with none named, Claude Code's own off", () => {
    const commands = [{ name: 'pdf' }, { name: 'docx' }, { name: 'doctor', builtin: true }, { name: 'compact', builtin: true }];
    expect(skillOverrides(commands, ['pdf'])).toEqual({ pdf: 'on', docx: 'off', doctor: 'off', compact: 'off' });
    expect(skillOverrides(commands, [])).toEqual({ pdf: 'off', docx: 'off', doctor: 'off', compact: 'off' });
    expect(skillOverrides(commands, undefined)).toEqual({ pdf: 'on', docx: 'on', doctor: 'off', compact: 'off' });
  });
});
