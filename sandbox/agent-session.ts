/**
 * How a runner starts its agent session. A pool runner may prewarm: start the agent runtime's CLI
 * process now, before any conversation is known (the SDK's `prewarm()`), and bind it at the first
 * turn with a claim, so a new conversation's first message does not wait for the process to start
 * and initialise. A claim cannot resume a session, so a first turn that resumes one (a conversation
 * moving to this runner) discards the spare and starts with `query()`, as does any claim the
 * process refuses.
 *
 * Skills: `query()` is given the run's names as its `skills` filter. A spare's filter is fixed at
 * prewarm, before the names are known, so it is started with the runtime's bundled skills off and,
 * once claimed, every other command the session lists but the run's skills is turned off by a
 * settings overlay, applied before the first message is read: the agent is offered the same set
 * either way.
 */
import { type Options, prewarm, type Query, query, type SDKMessage, type SDKUserMessage, type SpareProcess } from '@anthropic-ai/claude-agent-sdk';

export interface FirstTurn {
  cwd: string;
  /** The session to resume (its transcript comes from the store); a spare cannot take it. */
  resume?: string | undefined;
  /** The skills to offer; undefined offers what the workspace holds. */
  skills?: string[] | undefined;
}

type Log = (message: string) => void;

export class AgentSessions {
  private spare: Promise<SpareProcess | undefined> | undefined;

  /**
   * `options`: everything but the session's own cwd, resume and skills, made anew for each process
   * (an in-process MCP server instance serves one process only: a spare keeps its own).
   */
  constructor(
    private readonly options: () => Options,
    private readonly log: Log,
  ) {}

  /** Starts the runtime's process now, to be claimed by the first turn. */
  prewarm(): void {
    const options = this.options();
    const settings = typeof options.settings === 'object' ? options.settings : {};
    this.spare = prewarm({ options: { ...options, settings: { ...settings, disableBundledSkills: true } } }).catch((error: unknown) => {
      this.log(`prewarming the agent runtime failed; the first turn starts it: ${describe(error)}`);
      return undefined;
    });
  }

  /**
   * The session for the first turn; `prompt` yields the user turns (the first one already queued or
   * soon). `prewarmed`: it runs in the process started ahead.
   */
  async start(first: FirstTurn, prompt: AsyncIterable<SDKUserMessage>): Promise<{ session: Query; messages: AsyncIterable<SDKMessage>; prewarmed: boolean }> {
    const spare = await this.spare;
    this.spare = undefined;
    if (spare && first.resume === undefined) {
      const claimed = await this.claim(spare, first, prompt);
      if (claimed) return { session: claimed, messages: withoutClaimEchoes(claimed), prewarmed: true };
    } else {
      spare?.close();
    }
    const session = query({
      prompt,
      options: { ...this.options(), cwd: first.cwd, resume: first.resume, ...(first.skills && { skills: first.skills }) },
    });
    return { session, messages: session, prewarmed: false };
  }

  /** Discards a spare nobody claimed. */
  close(): void {
    void this.spare?.then((spare) => spare?.close());
    this.spare = undefined;
  }

  /**
   * Binds the spare to the session. The prompt is held until the claim is accepted and the skill
   * overlay applied, so a refused claim has consumed nothing and the caller's fallback gets every turn.
   */
  private async claim(spare: SpareProcess, first: FirstTurn, prompt: AsyncIterable<SDKUserMessage>): Promise<Query | undefined> {
    let release: (go: boolean) => void = () => {};
    const gate = new Promise<boolean>((resolve) => {
      release = resolve;
    });
    async function* held(): AsyncGenerator<SDKUserMessage> {
      if (await gate) yield* prompt;
    }
    let session: Query | undefined;
    try {
      session = spare.claim({ prompt: held(), options: { cwd: first.cwd, permissionMode: 'bypassPermissions' } });
      const [, init] = await Promise.all([spare.claimed, session.initializationResult()]);
      await session.applyFlagSettings({ skillOverrides: skillsOff(init.commands, first.skills) });
      release(true);
      return session;
    } catch (error) {
      release(false);
      spare.close();
      this.log(`the prewarmed agent runtime could not be claimed; starting it afresh: ${describe(error)}`);
      return undefined;
    }
  }
}

/**
 * The session's messages without the system notices the claim itself caused before the session's
 * `init` (the skill overlay makes the runtime announce changed settings and commands): a claimed
 * session's stream starts with `init`, as a fresh one's does.
 */
async function* withoutClaimEchoes(session: AsyncIterable<SDKMessage>): AsyncGenerator<SDKMessage> {
  let started = false;
  for await (const message of session) {
    if (!started && message.type === 'system') {
      if (message.subtype !== 'init') continue;
      started = true;
    }
    yield message;
  }
}

/** Every command the session lists that is not one of the offered skills, turned off (all of Claude Code's own, when none are named). */
export function skillsOff(commands: Array<{ name: string; builtin?: boolean | undefined }>, offered: string[] | undefined): Record<string, 'off'> {
  const keep = offered && new Set(offered);
  return Object.fromEntries(commands.filter((c) => (keep ? !keep.has(c.name) : c.builtin === true)).map((c) => [c.name, 'off' as const]));
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
