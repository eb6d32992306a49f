import type { AppDeps } from '../deps.js';
import { followStoredRun, type StreamLine } from './run-stream.js';

/**
 * The lines of a run after the first `after`: from memory while this node hosts the run, otherwise
 * from the stored lines (polling until the terminal line when another node still hosts it).
 */
export function followRun(deps: AppDeps, messageId: string, after: number, signal: AbortSignal): AsyncIterable<StreamLine> {
  const live = deps.runtime.runs.liveStream(messageId);
  return live ? live.follow(after, signal) : followStoredRun(deps.db, messageId, after, signal);
}
