/**
 * A SessionStore (the Agent SDK's transcript mirror) kept as JSONL files in one directory per conversation.
 * The SDK keys entries by {projectKey, sessionId, subpath}, where projectKey is derived from the runner's cwd;
 * a recycled runner resumes from another cwd, so this store deliberately ignores projectKey: the directory
 * already scopes it to one conversation.
 */
import { appendFile, mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SessionKey, SessionStore, SessionStoreEntry } from '@anthropic-ai/claude-agent-sdk';

export function createFileSessionStore(dir: string): SessionStore {
  // uuids already written per file, so retried or replayed batches are not duplicated (the SDK's advice).
  const seen = new Map<string, Set<string>>();
  // Appends to one file are chained so concurrent batches keep the order the SDK called them in.
  const tails = new Map<string, Promise<void>>();

  const fileOf = (key: SessionKey) => {
    const name = key.subpath === undefined ? key.sessionId : `${key.sessionId}~${encodeURIComponent(key.subpath)}`;
    return path.join(dir, `${name}.jsonl`);
  };

  const read = async (file: string): Promise<SessionStoreEntry[] | null> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
    return text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as SessionStoreEntry);
  };

  const writeBatch = async (file: string, entries: SessionStoreEntry[]) => {
    let uuids = seen.get(file);
    if (!uuids) {
      uuids = new Set((await read(file))?.flatMap((e) => (e.uuid ? [e.uuid] : [])) ?? []);
      seen.set(file, uuids);
    }
    const fresh = entries.filter((e) => !e.uuid || !uuids.has(e.uuid));
    if (fresh.length === 0) return;
    await mkdir(dir, { recursive: true });
    await appendFile(file, fresh.map((e) => `${JSON.stringify(e)}\n`).join(''));
    for (const e of fresh) if (e.uuid) uuids.add(e.uuid);
  };

  return {
    append(key, entries) {
      const file = fileOf(key);
      const next = (tails.get(file) ?? Promise.resolve()).catch(() => undefined).then(() => writeBatch(file, entries));
      tails.set(file, next);
      return next;
    },
    load: (key) => read(fileOf(key)),
    async listSubkeys(key) {
      const prefix = `${key.sessionId}~`;
      let names: string[];
      try {
        names = await readdir(dir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
      return names
        .filter((n) => n.startsWith(prefix) && n.endsWith('.jsonl'))
        .map((n) => decodeURIComponent(n.slice(prefix.length, -'.jsonl'.length)));
    },
  };
}
