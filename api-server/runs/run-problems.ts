/**
 * The platform's own problems of a run: what a send is refused with, or a run ends with, when the
 * fault is this node's and not the agent's.
 */
import { ProblemError } from '../core/problems.js';

/** This node cannot start runners; `reason` says what is missing and how to install it. */
export function sandboxUnavailableProblem(reason: string): ProblemError {
  return new ProblemError('sandbox-unavailable', 503, { detail: reason });
}

/** The node is shutting down and takes no new messages; another node (or this one once restarted) will. */
export function shuttingDownProblem(): ProblemError {
  return new ProblemError('shutting-down', 503, {
    detail: 'This server is shutting down and takes no new messages; send it again (another node, or this one once restarted, serves it).',
    headers: { 'Retry-After': '1' },
  });
}

/** Something on the platform side failed the run; the cause is in the log, never in the answer. */
export function internalProblem(): ProblemError {
  return new ProblemError('internal-error', 500, { detail: 'The agent run failed on the platform side.' });
}

/** The turn ran past ACIS_TURN_TIMEOUT_SECONDS: its runner was stopped and the run ended `failed`. */
export function turnTimeoutProblem(seconds: number): ProblemError {
  return new ProblemError('turn-timeout', 504, {
    detail: `The turn ran past this deployment's turn deadline (${seconds} s) and was stopped.`,
  });
}

/** The sandbox's writable space passed its limit during the turn: its runner was stopped and the run ended `failed`. */
export function workspaceTooLargeProblem(detail: string): ProblemError {
  return new ProblemError('workspace-too-large', 507, { detail });
}
