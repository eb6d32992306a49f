import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from 'koa';
import { canonicalJson } from './canonical-json.js';
import { json } from './db/database.js';
import type { CoreDeps } from './deps.js';
import { NDJSON, type RouteResult } from './http/route-result.js';
import { type Principal, principalKey } from './principal.js';
import { ProblemError, problems } from './problems.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_KEY_LENGTH = 255;
/** How long a retry waits for the first request with its key to finish before giving up with 409. */
const IN_FLIGHT_WAIT_MS = 10_000;
const IN_FLIGHT_POLL_MS = 25;
/** Response headers worth replaying; the rest (dates, request ids) belong to the new exchange. */
const REPLAYED_HEADERS = ['location', 'x-service-conversation-id', 'x-service-message-id', 'x-service-stream-format'];
const CONTENT_TYPE = 'content-type';

/**
 * Runs `execute` at most once per (principal, operation, key) within 24 hours.
 *
 * The first request claims the key with an `in_flight` row (a primary-key insert, so two nodes
 * cannot both win); its final response is stored. A replay with the same payload returns that
 * response with `Idempotency-Replayed: true`; another payload gets 409. A retry arriving while the
 * first is still running waits for it. Responses of 5xx are not stored, so a retry runs again.
 */
export async function withIdempotency(
  deps: CoreDeps,
  ctx: Context,
  principal: Principal,
  execute: () => Promise<RouteResult>,
  renderProblem: (error: ProblemError) => RouteResult,
): Promise<RouteResult> {
  const key = ctx.get('Idempotency-Key');
  if (!key) return execute();
  if (key.length > MAX_KEY_LENGTH) {
    throw problems.badRequest([], `Idempotency-Key must be at most ${MAX_KEY_LENGTH} characters.`);
  }
  const id = { principal: principalKey(principal), operation: `${ctx.method} ${ctx.path}`, key };
  // Keyed, so a stored fingerprint of a body that carries a secret cannot be brute-forced offline.
  const requestHash = createHmac('sha256', deps.vault.deriveKey('idempotency-fingerprint'))
    .update(canonicalJson({ query: ctx.querystring, body: ctx.request.body ?? null }))
    .digest('hex');

  const deadline = Date.now() + IN_FLIGHT_WAIT_MS;
  for (;;) {
    const now = deps.now();
    const claimed = await deps.db
      .insertInto('idempotency_keys')
      .values({
        ...id,
        request_hash: requestHash,
        state: 'in_flight',
        created_at: now,
        expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
      })
      .onConflict((oc) => oc.columns(['principal', 'operation', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (claimed) return runAndStore(deps, id, execute, renderProblem);

    const existing = await deps.db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('principal', '=', id.principal)
      .where('operation', '=', id.operation)
      .where('key', '=', id.key)
      .executeTakeFirst();
    if (!existing) continue; // released between our insert and select: claim again
    if (existing.expires_at.getTime() <= now.getTime()) {
      await deleteKey(deps, id);
      continue;
    }
    if (existing.request_hash !== requestHash) {
      throw new ProblemError('idempotency-key-conflict', 409, {
        detail: 'This Idempotency-Key was already used with a different request payload.',
      });
    }
    if (existing.state === 'done' && existing.response_status !== null) {
      const { [CONTENT_TYPE]: contentType, ...headers } = existing.response_headers ?? {};
      const body = existing.response_body ?? undefined;
      return {
        status: existing.response_status,
        // A stored stream is served again from the run's stored lines.
        ...(contentType === NDJSON ? { stream: body as { messageId: string } } : { body }),
        headers: { ...headers, 'Idempotency-Replayed': 'true' },
        contentType,
      };
    }
    if (Date.now() >= deadline) {
      throw new ProblemError('idempotency-key-in-use', 409, {
        detail: 'A request with this Idempotency-Key is still being processed; retry later.',
        headers: { 'Retry-After': '1' },
      });
    }
    await sleep(IN_FLIGHT_POLL_MS);
  }
}

type KeyId = { principal: string; operation: string; key: string };

async function runAndStore(
  deps: CoreDeps,
  id: KeyId,
  execute: () => Promise<RouteResult>,
  renderProblem: (error: ProblemError) => RouteResult,
): Promise<RouteResult> {
  let result: RouteResult;
  try {
    result = await execute();
  } catch (error) {
    if (!(error instanceof ProblemError) || error.status >= 500) {
      await deleteKey(deps, id);
      throw error;
    }
    result = renderProblem(error);
  }
  if (result.status >= 500) {
    await deleteKey(deps, id);
    return result;
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(result.headers ?? {})) {
    if (REPLAYED_HEADERS.includes(name.toLowerCase())) headers[name] = value;
  }
  if (result.contentType) headers[CONTENT_TYPE] = result.contentType;
  const body = result.stream ?? result.body;
  await deps.db
    .updateTable('idempotency_keys')
    .set({
      state: 'done',
      response_status: result.status,
      response_body: body === undefined ? null : json(body),
      response_headers: json(headers),
    })
    .where('principal', '=', id.principal)
    .where('operation', '=', id.operation)
    .where('key', '=', id.key)
    .execute();
  return result;
}

async function deleteKey(deps: CoreDeps, id: KeyId): Promise<void> {
  await deps.db
    .deleteFrom('idempotency_keys')
    .where('principal', '=', id.principal)
    .where('operation', '=', id.operation)
    .where('key', '=', id.key)
    .execute();
}

/** Drops expired keys; called periodically by the server. */
export async function purgeExpiredIdempotencyKeys(deps: Pick<CoreDeps, 'db' | 'now'>): Promise<number> {
  const result = await deps.db.deleteFrom('idempotency_keys').where('expires_at', '<=', deps.now()).executeTakeFirst();
  return Number(result.numDeletedRows);
}
