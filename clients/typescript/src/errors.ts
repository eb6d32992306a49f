import type { components } from './schema.js';

export type ProblemDocument = components['schemas']['Problem'];

/**
 * An RFC 9457 problem ACIS answered with, thrown by every call: `slug` is the last segment of its
 * `type` (`validation-error`, `not-found`, `capacity-exhausted`, ...), `fields` the JSON pointers
 * of a validation error with their messages.
 */
export class AcisProblem extends Error {
  readonly slug: string;
  readonly status: number;
  readonly fields: { pointer: string; message: string }[];
  readonly requestId: string | undefined;
  /** Seconds to wait before retrying (429, 503), from the Retry-After header. */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly problem: ProblemDocument,
    retryAfterSeconds?: number,
  ) {
    super(`${problem.status} ${problem.title}${problem.detail ? `: ${problem.detail}` : ''}`);
    this.name = 'AcisProblem';
    this.slug = problem.type.slice(problem.type.lastIndexOf('/') + 1);
    this.status = problem.status;
    this.fields = problem.errors ?? [];
    this.requestId = problem.request_id;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The problem a failed response carries; a response that is no problem document still throws, with its status. */
export async function problemOf(response: Response): Promise<AcisProblem> {
  const retryAfter = retryAfterSeconds(response.headers.get('retry-after'));
  const text = await response.text();
  try {
    const body = JSON.parse(text) as ProblemDocument;
    if (typeof body.type === 'string' && typeof body.status === 'number') return new AcisProblem(body, retryAfter);
  } catch {
    // not JSON: described below
  }
  return new AcisProblem(
    { type: 'about:blank', title: response.statusText || 'Error', status: response.status, detail: text.slice(0, 500) },
    retryAfter,
  );
}

/** Retry-After as seconds: a delay in seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterSeconds(header: string | null): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}
