/**
 * How a runner starts its agent session. A pool runner may prewarm: start the agent runtime's CLI
 * process before any conversation is known (the SDK's `prewarm()`) and, since inside its sandbox the
 * workspace is a fixed folder, bind that process to it at once (a claim) with the prompt held back.
 * Process start, tools, MCP handshakes and the session's own set-up (registration, the folder's
 * CLAUDE.md and git context) are then done before a new conversation's first message arrives, and
 * the message goes straight to the waiting session. A bound session cannot resume another, so a first
 * turn that resumes one (a conversation moving to this runner) discards it and starts with `query()`,
 * as does a first turn in another folder, or one that finds the workspace holding more than it held
 * once bound plus the run's skills (what the claim read of the folder would be stale; a runner pod's
 * HOME lies inside its workspace and is there at both), a process that died while waiting, or a
 * refused claim.
 *
 * Skills: `query()` is given the run's names as its `skills` filter. A prewarmed process's filter is
 * fixed before the names are known, so it is started with the runtime's bundled skills off and, once
 * bound, every command it lists is turned off by a settings overlay. At the first turn the run's skills
 * (delivered into the workspace just before) are reloaded from disk and the overlay set to offer
 * exactly them before the first message is read: the agent is offered the same set either way. A run
 * without skills needs neither step.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { type Options, prewarm, type Query, query, type SDKMessage, type SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';

export interface FirstTurn {
  cwd: string;
  /** The session to resume (its transcript comes from the store); a bound session cannot take it. */
  resume?: string | undefined;
  /** The skills to offer; undefined offers what the workspace holds. */
  skills?: string[] | undefined;
}

type Log = (message: string) => void;
type Turns = AsyncIterable<SDKUserMessage>;

/** A command as the runtime lists it. */
export interface ListedCommand {
  name: string;
  builtin?: boolean | undefined;
}

/** A prewarmed process bound to the workspace, waiting for its first message. */
interface BoundSession {
  session: Query;
  /** The workspace it is bound to, and what that held once bound (undefined: it could not be read). */
  cwd: string;
  seen: WorkspaceEntries | undefined;
  /** What the session listed once bound (all of it turned off since). */
  commands: ListedCommand[];
  /** Hands the session its turns; undefined ends its prompt unread. */
  feed(turns: Turns | undefined): void;
  /** False once its process has exited. */
  alive(): boolean;
}

export class AgentSessions {
  private bound: Promise<BoundSession | undefined> | undefined;

  /**
   * `options`: everything but the session's own cwd, resume and skills, made anew for each process
   * (an in-process MCP server instance serves one process only: a prewarmed one keeps its own).
   */
  constructor(
    private readonly options: () => Options,
    private readonly log: Log,
  ) {}

  /** Starts the runtime's process now and binds it to the workspace `cwd`, for the first turn; settles once bound (or failed). */
  prewarm(cwd: string): Promise<void> {
    this.bound = this.bind(cwd).catch((error: unknown) => {
      this.log(`prewarming the agent runtime failed; the first turn starts it: ${describe(error)}`);
      return undefined;
    });
    return this.bound.then(() => undefined);
  }

  /**
   * The session for the first turn; `prompt` yields the user turns (the first one already queued or
   * soon). `prewarmed`: it runs in the process started ahead.
   */
  async start(first: FirstTurn, prompt: Turns): Promise<{ session: Query; messages: AsyncIterable<SDKMessage>; prewarmed: boolean }> {
    const bound = await this.bound;
    this.bound = undefined;
    if (bound) {
      const usable =
        bound.alive() && first.resume === undefined && first.cwd === bound.cwd && (await onlySkillsAdded(first.cwd, bound.seen));
      const session = usable ? await this.open(bound, first, prompt) : discard(bound);
      if (session) return { session, messages: withoutBindingEchoes(session), prewarmed: true };
    }
    const session = query({
      prompt,
      options: { ...this.options(), cwd: first.cwd, resume: first.resume, ...(first.skills && { skills: first.skills }) },
    });
    return { session, messages: session, prewarmed: false };
  }

  /** Discards a prewarmed process nobody used. */
  close(): void {
    void this.bound?.then((bound) => bound && discard(bound));
    this.bound = undefined;
  }

  /** Prewarms a process and claims it for `cwd` at once, its prompt held; then turns off every command it lists. */
  private async bind(cwd: string): Promise<BoundSession> {
    const options = this.options();
    const settings = typeof options.settings === 'object' ? options.settings : {};
    const spare = await prewarm({ options: { ...options, settings: { ...settings, disableBundledSkills: true } } });
    let exited = false;
    void spare.exited.then(() => (exited = true));
    const held = heldPrompt();
    const session = spare.claim({ prompt: held.prompt, options: { cwd, permissionMode: 'bypassPermissions' } });
    try {
      const [, init] = await Promise.all([spare.claimed, session.initializationResult()]);
      await session.applyFlagSettings({ skillOverrides: skillOverrides(init.commands, []) });
      const seen = await workspaceEntries(cwd);
      return { session, cwd, seen, commands: init.commands, feed: held.feed, alive: () => !exited };
    } catch (error) {
      held.feed(undefined);
      spare.close();
      throw error;
    }
  }

  /**
   * Hands the bound session its turns once it offers the run's skills (reloaded from the workspace and
   * turned on by the overlay). If that fails the session is let go with every turn still unread, and
   * the caller starts afresh.
   */
  private async open(bound: BoundSession, first: FirstTurn, prompt: Turns): Promise<Query | undefined> {
    try {
      if (first.skills === undefined || first.skills.length > 0) {
        const { skills } = await bound.session.reloadSkills();
        await bound.session.applyFlagSettings({ skillOverrides: skillOverrides([...bound.commands, ...skills], first.skills) });
      }
      bound.feed(prompt);
      return bound.session;
    } catch (error) {
      discard(bound);
      this.log(`the prewarmed agent runtime could not be used; starting it afresh: ${describe(error)}`);
      return undefined;
    }
  }
}

function discard(bound: BoundSession): undefined {
  bound.feed(undefined);
  bound.session.close();
  return undefined;
}

/** A prompt whose turns are handed over later (`feed`); fed undefined, it ends without any. */
function heldPrompt(): { prompt: Turns; feed(turns: Turns | undefined): void } {
  let feed: (turns: Turns | undefined) => void = () => {};
  const fed = new Promise<Turns | undefined>((resolve) => (feed = resolve));
  async function* prompt(): AsyncGenerator<SDKUserMessage> {
    const turns = await fed;
    if (turns) yield* turns;
  }
  return { prompt: prompt(), feed };
}

/** The workspace's top-level entries and those of its `.claude` folder. */
interface WorkspaceEntries {
  top: string[];
  claude: string[];
}

/** Undefined when the workspace cannot be read. */
async function workspaceEntries(cwd: string): Promise<WorkspaceEntries | undefined> {
  try {
    const top = await readdir(cwd);
    return { top, claude: top.includes('.claude') ? await readdir(path.join(cwd, '.claude')) : [] };
  } catch {
    return undefined;
  }
}

/**
 * Whether the workspace holds nothing the claim did not see but `.claude/skills` (the run's skills,
 * delivered after it): anything new there (a conversation's earlier files, a CLAUDE.md, project
 * settings) would make what the claim read of the folder stale.
 */
async function onlySkillsAdded(cwd: string, seen: WorkspaceEntries | undefined): Promise<boolean> {
  const now = await workspaceEntries(cwd);
  // A workspace that could not be read at either time cannot be vouched for.
  if (!now || !seen) return false;
  return (
    now.top.every((entry) => entry === '.claude' || seen.top.includes(entry)) &&
    now.claude.every((entry) => entry === 'skills' || seen.claude.includes(entry))
  );
}

/**
 * The session's messages without the system notices its binding caused before the session's `init`
 * (the skill overlay makes the runtime announce changed settings and commands): a prewarmed session's
 * stream starts with `init`, as a fresh one's does.
 */
async function* withoutBindingEchoes(session: AsyncIterable<SDKMessage>): AsyncGenerator<SDKMessage> {
  let started = false;
  for await (const message of session) {
    if (!started && message.type === 'system') {
      if (message.subtype !== 'init') continue;
      started = true;
    }
    yield message;
  }
}

/**
 * Each listed command on or off: the offered skills on, every other command off (only Claude Code's
 * own, when none are named). Both ways are spelled out, so the overlay replaces an earlier one whole.
 */
export function skillOverrides(commands: ListedCommand[], offered: string[] | undefined): Record<string, 'on' | 'off'> {
  const keep = offered && new Set(offered);
  return Object.fromEntries(
    commands.map((c) => [c.name, (keep ? keep.has(c.name) : c.builtin !== true) ? ('on' as const) : ('off' as const)]),
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
