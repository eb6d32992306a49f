/**
 * The control protocol between the API server and a runner, one JSON object per line over the
 * runner's stdin and stdout. Everything the agent runtime emits is forwarded on stdout verbatim
 * (those lines become the conversation's stream); the runner's own lines all have a `runner_` type,
 * which no agent event uses.
 */

/** Server → runner (stdin). */
export type ServerCommand =
  | {
      type: 'turn';
      /** The user's message text. */
      content: string;
      /** The message's `env`: plain run parameters the agent sees verbatim beside the text. */
      env?: Record<string, string> | undefined;
      /** Only on a runner's first turn: the session to resume (its transcript comes from the store). */
      resume?: string | undefined;
      /** Only on a runner's first turn: project skills to offer (already materialised in the workspace). */
      skills?: string[] | undefined;
    }
  | { type: 'session_entries'; request_id: number; entries: unknown[] | null }
  | { type: 'session_ack'; request_id: number; error?: string | undefined }
  /** The outcome of a `request_approval` call, as the tool result the agent sees. */
  | { type: 'approval_result'; request_id: number; text: string; is_error: boolean };

/** Runner → server (stdout), besides the verbatim agent events. */
export type RunnerLine =
  | { type: 'runner_ready' }
  | { type: 'runner_error'; error: string }
  | { type: 'runner_session_load'; request_id: number; key: SessionKeyLike }
  | { type: 'runner_session_append'; request_id: number; key: SessionKeyLike; entries: unknown[] }
  /** The agent called the platform tool `request_approval`; the call waits for `approval_result`. */
  | { type: 'runner_approval_request'; request_id: number; input: unknown };

export interface SessionKeyLike {
  projectKey: string;
  sessionId: string;
  subpath?: string | undefined;
}

/** The store key of a transcript: the session and, for a subagent transcript, its subpath. */
export function sessionStoreKey(key: SessionKeyLike): string {
  return key.subpath ? `${key.sessionId}/${key.subpath}` : key.sessionId;
}

export function isRunnerLine(line: { type?: unknown }): line is RunnerLine {
  return typeof line.type === 'string' && line.type.startsWith('runner_');
}
