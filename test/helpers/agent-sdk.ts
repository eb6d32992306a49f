/** Small helpers for suites that run the real Agent SDK against the model stub. */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { SDKMessage, SDKResultMessage, SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';

/**
 * The environment an SDK process needs to run offline against the stub. CLAUDE_CONFIG_DIR is set explicitly
 * because the SDK parent computes where transcripts live from it (falling back to ITS OWN home, not the
 * child's HOME); without it a sessionStore receives nothing. Root must declare a sandbox to bypass permissions.
 */
export function sdkEnv(stubUrl: string, home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
    ANTHROPIC_BASE_URL: stubUrl,
    ANTHROPIC_API_KEY: 'dummy',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ...(process.getuid?.() === 0 ? { IS_SANDBOX: '1' } : {}),
  };
}

/** A fresh workspace and HOME under root/name. */
export async function conversationDirs(root: string, name: string) {
  const cwd = path.join(root, name, 'workspace');
  const home = path.join(root, name, 'home');
  await mkdir(cwd, { recursive: true });
  await mkdir(home, { recursive: true });
  return { cwd, home };
}

/** Drains a query; an error it throws (the SDK throws after an error result) is returned, not raised. */
export async function collect(messages: AsyncIterable<SDKMessage>): Promise<{ messages: SDKMessage[]; error?: Error }> {
  const seen: SDKMessage[] = [];
  try {
    for await (const message of messages) seen.push(message);
    return { messages: seen };
  } catch (error) {
    return { messages: seen, error: error as Error };
  }
}

export function resultOf(messages: SDKMessage[]): SDKResultMessage {
  const results = messages.filter((m): m is SDKResultMessage => m.type === 'result');
  if (results.length !== 1) throw new Error(`expected one result, got ${results.length}`);
  return results[0]!;
}

/** The text the stream_event text deltas carried, in order. */
export function streamedText(messages: SDKMessage[]): string {
  return messages
    .flatMap((m) =>
      m.type === 'stream_event' && m.event.type === 'content_block_delta' && m.event.delta.type === 'text_delta'
        ? [m.event.delta.text]
        : [],
    )
    .join('');
}

export function userMessage(text: string): SDKUserMessage {
  return { type: 'user', message: { role: 'user', content: text }, parent_tool_use_id: null, session_id: '' };
}
