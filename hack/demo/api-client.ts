/**
 * The demo's HTTP client: one call per REST step, each checked against the statuses the step may
 * answer, so an unexpected answer stops the demo with the server's problem detail.
 */

export class DemoError extends Error {}

export interface CallOptions {
  token: string;
  body?: unknown;
  /** The acceptable statuses; anything else throws a DemoError. */
  expect: number[];
}

export interface JsonAnswer {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: the demo reads the API's JSON answers field by field and checks what it shows
  body: any;
}

export function createApiClient(baseUrl: string) {
  const send = (method: string, path: string, options: CallOptions) =>
    fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${options.token}`,
        ...(options.body !== undefined && { 'content-type': 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    }).catch((error: unknown) => {
      throw new DemoError(`${method} ${path}: cannot reach ${baseUrl} (${(error as Error).message})`);
    });

  return {
    /** A JSON request; the answer's body is parsed (null for an empty one). */
    async call(method: string, path: string, options: CallOptions): Promise<JsonAnswer> {
      const response = await send(method, path, options);
      const text = await response.text();
      if (!options.expect.includes(response.status)) throw unexpected(method, path, options.expect, response.status, text);
      return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
    },

    /** A request answered with an NDJSON stream; the body is left unread for the caller to follow. */
    async stream(method: string, path: string, options: CallOptions): Promise<Response> {
      const response = await send(method, path, options);
      if (!options.expect.includes(response.status)) {
        throw unexpected(method, path, options.expect, response.status, await response.text());
      }
      const type = response.headers.get('content-type') ?? '';
      if (!type.startsWith('application/x-ndjson')) {
        await response.body?.cancel();
        throw new DemoError(`${method} ${path}: expected an application/x-ndjson stream, got ${type || 'no content type'}`);
      }
      return response;
    },
  };
}

export type ApiClient = ReturnType<typeof createApiClient>;

function unexpected(method: string, path: string, expected: number[], status: number, text: string): DemoError {
  let detail = text.trim();
  try {
    // RFC 9457 problem: the slug and detail say what went wrong.
    const problem = JSON.parse(text) as { type?: string; detail?: string; errors?: unknown };
    const slug = problem.type?.split('/').pop();
    detail = [slug, problem.detail, problem.errors && JSON.stringify(problem.errors)].filter(Boolean).join(': ');
  } catch {
    // not JSON: show the text as is
  }
  return new DemoError(`${method} ${path} answered ${status} (expected ${expected.join(' or ')})${detail ? `: ${detail}` : ''}`);
}
