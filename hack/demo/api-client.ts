/**
 * The demo's REST steps, through the ACIS TypeScript client (`clients/typescript`) as a host adapter
 * would call ACIS: each step is printed as `METHOD path  status  detail` and checked against the
 * statuses it may answer, so an unexpected answer (or a problem the client throws) stops the demo
 * with the server's problem slug and detail.
 */
import { AcisProblem } from '../../clients/typescript/src/index.js';

export class DemoError extends Error {}

/** What an openapi-fetch call resolves to. */
interface CallResult<T> {
  data?: T;
  response: Response;
}

/** Runs one call, prints it, and returns its body; any other status than `expect` stops the demo. */
export async function step<T>(
  label: string,
  call: Promise<CallResult<T>>,
  expect: number[],
  detail: (body: T, response: Response) => string,
): Promise<{ body: T; response: Response }> {
  const { data, response } = await call.catch((error: unknown) => {
    throw demoError(label, error);
  });
  if (!expect.includes(response.status)) throw new DemoError(`${label} answered ${response.status} (expected ${expect.join(' or ')})`);
  const body = data as T;
  console.log(`  ${label.padEnd(64)} ${response.status}  ${detail(body, response)}`);
  return { body, response };
}

/** A problem or a failure to reach the server, said in one line. */
export function demoError(label: string, error: unknown): DemoError {
  if (error instanceof DemoError) return error;
  if (error instanceof AcisProblem) {
    const fields = error.fields.length > 0 ? `: ${JSON.stringify(error.fields)}` : '';
    return new DemoError(
      `${label} answered ${error.status} ${error.slug}${error.problem.detail ? `: ${error.problem.detail}` : ''}${fields}`,
    );
  }
  return new DemoError(`${label}: cannot reach ACIS (${(error as Error).message})`);
}
