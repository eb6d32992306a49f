import { randomUUID } from 'node:crypto';
import createClient, { type Client, type Middleware } from 'openapi-fetch';
import { problemOf } from './errors.js';
import { type HttpTarget, MessageStream } from './message-stream.js';
import { type RetryOptions, retryingFetch } from './retrying-fetch.js';
import type { components, operations, paths } from './schema.js';

export type CreateConversationBody = NonNullable<operations['createConversation']['requestBody']>['content']['application/json'];
export type SendMessageBody = NonNullable<operations['sendMessage']['requestBody']>['content']['application/json'];
export type Token = components['schemas']['Token'];

export interface AcisClientOptions {
  /** Where ACIS serves its API, e.g. `https://acis.example.com`. */
  baseUrl: string;
  /** The integration's service key (`sk_int_…`) or an end user's platform JWT. */
  token: string;
  retry?: RetryOptions;
  /** The fetch to send with (default: the global one). */
  fetch?: typeof fetch;
}

export interface AcisClient {
  /** Every operation of the OpenAPI document, typed by it (openapi-fetch); a failure throws `AcisProblem`. */
  api: Client<paths>;
  /** Sends a message and streams its run: every line once, re-attaching after a dropped connection. */
  sendMessage(conversationId: string, body: SendMessageBody, options?: { idempotencyKey?: string }): MessageStream;
  /**
   * Creates a conversation with its first message and streams that run (its leading line is the
   * conversation; `stream.conversationId` names it once the answer arrived).
   */
  startConversation(
    body: CreateConversationBody & { initial_message: SendMessageBody },
    options?: { idempotencyKey?: string },
  ): MessageStream;
  /** Follows a run already started (another process sent it), from after its first `after` lines. */
  attach(conversationId: string, messageId: string, after?: number): MessageStream;
  /** Exchanges the service key for an end user's platform JWT (`POST /auth/token-exchange`). */
  exchangeToken(tenantExternalId: string, userExternalId: string, ttlSeconds?: number): Promise<Token>;
  /** A client calling as that end user: `asUser((await exchangeToken(…)).token)`. */
  asUser(userToken: string): AcisClient;
}

/** The `data` of an openapi-fetch call (its failures already threw). */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, response } = await call;
  if (data === undefined && response.status !== 204) throw new Error(`${response.status}: no body`);
  return data as T;
}

export function createAcisClient(options: AcisClientOptions): AcisClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const send = retryingFetch(options.fetch ?? fetch, options.retry);
  const headers = { authorization: `Bearer ${options.token}` };
  const api = createClient<paths>({ baseUrl, fetch: send, headers });
  api.use(idempotencyKeys, problemsThrown);
  const http: HttpTarget = { baseUrl, fetch: send, headers };

  const client: AcisClient = {
    api,
    sendMessage(conversationId, body, sendOptions = {}) {
      return new MessageStream(http, conversationId, () =>
        send(`${baseUrl}/conversations/${encodeURIComponent(conversationId)}/messages`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': sendOptions.idempotencyKey ?? randomUUID() },
          body: JSON.stringify(body),
        }),
      );
    },
    startConversation(body, startOptions = {}) {
      return new MessageStream(http, undefined, () =>
        send(`${baseUrl}/conversations`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': startOptions.idempotencyKey ?? randomUUID() },
          body: JSON.stringify(body),
        }),
      );
    },
    attach(conversationId, messageId, after = 0) {
      const stream = new MessageStream(http, conversationId, () =>
        send(
          `${baseUrl}/conversations/${encodeURIComponent(conversationId)}/messages/${encodeURIComponent(messageId)}/stream?after=${after}`,
          {
            headers,
          },
        ),
      );
      stream.messageId = messageId;
      stream.seen = after;
      return stream;
    },
    exchangeToken: (tenantExternalId, userExternalId, ttlSeconds) =>
      unwrap(
        api.POST('/auth/token-exchange', {
          body: { tenant_external_id: tenantExternalId, user_external_id: userExternalId, ...(ttlSeconds && { ttl_seconds: ttlSeconds }) },
        }),
      ),
    asUser: (userToken) => createAcisClient({ ...options, token: userToken }),
  };
  return client;
}

/** Every POST carries an Idempotency-Key (one per call, kept across its retries) unless the caller gave one. */
const idempotencyKeys: Middleware = {
  onRequest({ request }) {
    if (request.method === 'POST' && !request.headers.has('idempotency-key')) request.headers.set('idempotency-key', randomUUID());
    return request;
  },
};

/** A problem answer becomes a thrown `AcisProblem` with its slug, status and fields. */
const problemsThrown: Middleware = {
  async onResponse({ response }) {
    if (!response.ok) throw await problemOf(response);
    return response;
  },
};
