/**
 * The control protocol between the API server and a runner, one JSON object per line over a channel
 * (channel.ts): the runner's stdin and stdout when the API server started it, the resumable link
 * (link.ts) when it runs in a pod. Everything the agent runtime emits is forwarded verbatim (those
 * lines become the conversation's stream); the runner's own lines all have a `runner_` type, which no
 * agent event uses.
 *
 * Two kinds of calls cross it besides turns: the runner's (`request_id`: transcript store, approvals),
 * which the server answers, and the server's (`op_id`: skills, workspace archive), which the runner
 * ends with `runner_op_done`. Nothing else is shared between the two: no disk, no socket.
 */

/** One skill as it crosses the channel: its folder name and files (paths inside it, contents base64). */
export interface WireSkill {
  name: string;
  files: Array<{ path: string; data: string; executable: boolean }>;
}

/** Server → runner. */
export type ServerCommand =
  | {
      type: 'turn';
      /** The user's message text. */
      content: string;
      /** The message's `env`: plain run parameters the agent sees verbatim beside the text. */
      env?: Record<string, string> | undefined;
      /** Only on a runner's first turn: the session to resume (its transcript comes from the store). */
      resume?: string | undefined;
      /** Only on a runner's first turn: project skills to offer (sent by a `skills` call ahead of it, which the turn waits for). */
      skills?: string[] | undefined;
    }
  | { type: 'session_entries'; request_id: number; entries: unknown[] | null }
  | { type: 'session_ack'; request_id: number; error?: string | undefined }
  /** The outcome of a `request_approval` call, as the tool result the agent sees. */
  | { type: 'approval_result'; request_id: number; text: string; is_error: boolean }
  /** Replaces `<cwd>/.claude/skills/` with these skills. */
  | { type: 'skills'; op_id: number; skills: WireSkill[] }
  /** Sends the workspace (the cwd) as a gzipped tar in `runner_workspace_chunk` lines; fails past max_bytes. */
  | { type: 'workspace_export'; op_id: number; max_bytes: number; exclude?: string[] | undefined }
  /** One piece (base64) of a gzipped tar to unpack into the workspace; the `last` piece ends the operation. */
  | { type: 'workspace_import'; op_id: number; data: string; last: boolean };

/** Runner → server, besides the verbatim agent events. */
export type RunnerLine =
  /**
   * The runner is up: its first line on stdio, and the first line each new API connection gets over
   * TCP. A connection taking the link over gets it after the replayed lines, followed by the
   * questions (`request_id`) still unanswered, asked again.
   */
  | { type: 'runner_ready' }
  | { type: 'runner_error'; error: string }
  | { type: 'runner_session_load'; request_id: number; key: SessionKeyLike }
  | { type: 'runner_session_append'; request_id: number; key: SessionKeyLike; entries: unknown[] }
  /** The agent called the platform tool `request_approval`; the call waits for `approval_result`. */
  | { type: 'runner_approval_request'; request_id: number; input: unknown }
  | { type: 'runner_workspace_chunk'; op_id: number; data: string }
  /** A server call (`op_id`) is over: done, or failed with `error`. */
  | { type: 'runner_op_done'; op_id: number; error?: string | undefined };

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
