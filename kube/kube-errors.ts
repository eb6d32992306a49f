/** The HTTP status of an error from @kubernetes/client-node (its ApiException, or a watch error). */
export function httpStatus(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { code?: unknown; statusCode?: unknown };
  if (typeof e.code === 'number') return e.code;
  if (typeof e.statusCode === 'number') return e.statusCode;
  return undefined;
}

/** The Status message the API server sent with an error, for conditions and logs. */
export function statusMessage(error: unknown): string {
  const body = (error as { body?: unknown })?.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: string };
      if (parsed.message) return parsed.message;
    } catch {
      return body;
    }
  }
  if (body && typeof body === 'object' && 'message' in body) return String((body as { message: unknown }).message);
  return error instanceof Error ? error.message : String(error);
}
