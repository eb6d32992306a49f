/**
 * The TypeScript client (`clients/typescript`) against a running ACIS with the real agent and the
 * model stub: every operation of the OpenAPI document called through it at least once; a stream
 * cut mid-run re-attached with every line once; a 429 retried after its Retry-After; a POST whose
 * connection is cut after it was sent retried under its Idempotency-Key, creating one resource;
 * problems thrown as typed errors; pagination both ways. And the committed generated types match a
 * fresh generation from today's routes.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../../api-server/routes.js';
import {
  AcisProblem,
  type AcisClient,
  type components,
  createAcisClient,
  isTerminal,
  paginate,
  type StreamLine,
  unwrap,
} from '../../clients/typescript/src/index.js';

/** Without `initial_message` a conversation create answers the conversation (with it, the run's stream). */
type Conversation = components['schemas']['Conversation'];
import { CLIENT_SCHEMA, clientSchemaSource } from '../../hack/client-schema.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { hmacAssertion } from '../helpers/approver.js';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../helpers/test-server.js';

const APPROVAL_TOOL = 'mcp__platform__request_approval';

let stub: ModelStub;
let t: TestServer;
let serviceKey: string;
/** Every request the clients sent: method and path, to tell which operations were called. */
const sent: Array<{ method: string; path: string; status: number }> = [];

const recording: typeof fetch = async (input, init) => {
  const request = new Request(input, init);
  const response = await fetch(request);
  sent.push({ method: request.method, path: new URL(request.url).pathname, status: response.status });
  return response;
};

const client = (token: string, fetchWith: typeof fetch = recording): AcisClient =>
  createAcisClient({ baseUrl: t.url, token, fetch: fetchWith, retry: { baseDelayMs: 20 } });

beforeAll(async () => {
  stub = await startModelStub();
  t = await startTestServer({ ANTHROPIC_BASE_URL: stub.url, ACIS_POOL_SIZE: '1', ACIS_PING_INTERVAL_MS: '200' });
  const admin = client(ADMIN_TOKEN);
  const integration = await unwrap(admin.api.POST('/admin/integrations', { body: { name: 'client test' } }));
  serviceKey = integration.service_key;
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

async function collect(stream: AsyncIterable<StreamLine>): Promise<StreamLine[]> {
  const lines: StreamLine[] = [];
  for await (const line of stream) lines.push(line);
  return lines;
}

/** A tenant with a role granting every skill, and a user holding it. */
async function provision(acis: AcisClient) {
  const tenantEid = unique('tenant');
  const tenant = await unwrap(
    acis.api.PUT('/tenants/by-external-id/{external_id}', {
      params: { path: { external_id: tenantEid } },
      body: { name: tenantEid, settings: { filler_enabled: false } },
    }),
  );
  const role = await unwrap(
    acis.api.POST('/tenants/{tenant_id}/roles', {
      params: { path: { tenant_id: tenant.id } },
      body: { name: unique('role'), skill_access: { mode: 'all' } },
    }),
  );
  const userEid = unique('user');
  const user = await unwrap(
    acis.api.PUT('/tenants/{tenant_id}/users/by-external-id/{external_id}', {
      params: { path: { tenant_id: tenant.id, external_id: userEid } },
      body: { role_id: role.id, display_name: 'Ada' },
    }),
  );
  return { tenant, tenantEid, role, user, userEid };
}

describe('the TypeScript client', () => {
  it('has generated types that match the OpenAPI document of today’s routes', async () => {
    expect(await readFile(CLIENT_SCHEMA, 'utf8')).toBe(await clientSchemaSource());
  });

  it('provisions, converses, raises and resolves approvals and walks listings, calling every operation', async () => {
    const acis = client(serviceKey);
    const admin = client(ADMIN_TOKEN);
    const me = await unwrap(acis.api.GET('/integration'));
    const spareKey = await unwrap(
      admin.api.POST('/admin/integrations/{integration_id}/service-keys', { params: { path: { integration_id: me.id } } }),
    );
    await admin.api.DELETE('/admin/service-keys/{service_key_id}', { params: { path: { service_key_id: spareKey.id } } });

    const { tenant, tenantEid, role, user, userEid } = await provision(acis);
    const child = await unwrap(
      acis.api.POST('/tenants', { body: { name: unique('child'), external_id: unique('child'), parent_id: tenant.id } }),
    );
    expect((await unwrap(acis.api.GET('/tenants/{tenant_id}', { params: { path: { tenant_id: child.id } } }))).parent_id).toBe(tenant.id);
    await acis.api.PATCH('/tenants/{tenant_id}', { params: { path: { tenant_id: child.id } }, body: { metadata: { tier: 'gold' } } });
    await acis.api.DELETE('/tenants/{tenant_id}', { params: { path: { tenant_id: child.id } } });
    expect((await unwrap(acis.api.GET('/tenants/by-external-id/{external_id}', { params: { path: { external_id: tenantEid } } }))).id).toBe(
      tenant.id,
    );

    const credential = await unwrap(
      acis.api.POST('/credentials', { body: { name: unique('pat'), type: 'git_pat', secret: 'ghp_canary' } }),
    );
    expect((await unwrap(acis.api.GET('/credentials/{credential_id}', { params: { path: { credential_id: credential.id } } }))).name).toBe(
      credential.name,
    );
    const repository = await unwrap(
      acis.api.POST('/repositories', {
        body: { name: unique('skills'), repo_url: 'https://git.invalid/acme/skills.git', credential_id: credential.id },
      }),
    );
    await acis.api.PATCH('/repositories/{repository_id}', {
      params: { path: { repository_id: repository.id } },
      body: { metadata: { a: 'b' } },
    });
    await acis.api.POST('/repositories/{repository_id}/sync', { params: { path: { repository_id: repository.id } } }).catch((error) => {
      expect(error).toBeInstanceOf(AcisProblem);
    });
    await unwrap(acis.api.GET('/repositories/{repository_id}/sync', { params: { path: { repository_id: repository.id } } }));
    const skill = await unwrap(
      acis.api.POST('/repositories/{repository_id}/skills', {
        params: { path: { repository_id: repository.id } },
        body: { name: unique('skill') },
      }),
    );
    expect(
      (await unwrap(acis.api.GET('/repositories/{repository_id}/skills', { params: { path: { repository_id: repository.id } } }))).data.map(
        (s) => s.id,
      ),
    ).toContain(skill.id);
    await acis.api.PUT('/tenants/{tenant_id}/repository', {
      params: { path: { tenant_id: tenant.id } },
      body: { repository_id: repository.id },
    });
    await acis.api.DELETE('/tenants/{tenant_id}/repository', { params: { path: { tenant_id: tenant.id } } });
    await unwrap(acis.api.GET('/repositories/{repository_id}', { params: { path: { repository_id: repository.id } } }));
    await acis.api.DELETE('/repositories/{repository_id}', { params: { path: { repository_id: repository.id } } });
    await acis.api.DELETE('/credentials/{credential_id}', { params: { path: { credential_id: credential.id } } });

    await acis.api.PATCH('/roles/{role_id}', { params: { path: { role_id: role.id } }, body: { description: 'everything' } });
    expect((await unwrap(acis.api.GET('/roles/{role_id}', { params: { path: { role_id: role.id } } }))).description).toBe('everything');
    const spareRole = await unwrap(
      acis.api.POST('/tenants/{tenant_id}/roles', { params: { path: { tenant_id: tenant.id } }, body: { name: unique('spare') } }),
    );
    await acis.api.DELETE('/roles/{role_id}', { params: { path: { role_id: spareRole.id } } });
    await acis.api.PATCH('/users/{user_id}', { params: { path: { user_id: user.id } }, body: { display_name: 'Ada L.' } });
    expect((await unwrap(acis.api.GET('/users/{user_id}', { params: { path: { user_id: user.id } } }))).display_name).toBe('Ada L.');
    expect(
      (await unwrap(acis.api.GET('/users/{user_id}/roles', { params: { path: { user_id: user.id } } }))).data.map((r) => r.id),
    ).toEqual([role.id]);

    await acis.api.PUT('/tenants/{tenant_id}/secrets', {
      params: { path: { tenant_id: tenant.id } },
      body: { secrets: { TENANT_KEY: 'tenant-canary' } },
    });
    await acis.api.PUT('/users/{user_id}/secrets', {
      params: { path: { user_id: user.id } },
      body: { secrets: { USER_KEY: 'user-canary' } },
    });
    const tenantSecrets = await unwrap(acis.api.GET('/tenants/{tenant_id}/secrets', { params: { path: { tenant_id: tenant.id } } }));
    expect(tenantSecrets.data.map((s) => s.alias)).toEqual(['TENANT_KEY']);
    expect(JSON.stringify(tenantSecrets)).not.toContain('tenant-canary');
    await unwrap(acis.api.GET('/users/{user_id}/secrets', { params: { path: { user_id: user.id } } }));
    await acis.api.DELETE('/users/{user_id}/secrets/{alias}', { params: { path: { user_id: user.id, alias: 'USER_KEY' } } });
    await acis.api.DELETE('/tenants/{tenant_id}/secrets/{alias}', { params: { path: { tenant_id: tenant.id, alias: 'TENANT_KEY' } } });

    // A conversation, as the end user, through a JWT-scoped client.
    const token = await acis.exchangeToken(tenantEid, userEid);
    const asUser = acis.asUser(token.token);
    const conversationEid = unique('conversation');
    const conversation = (await unwrap(
      asUser.api.PUT('/conversations/by-external-id/{external_id}', {
        params: { path: { external_id: conversationEid } },
        body: { title: 'First' },
      }),
    )) as Conversation;
    await asUser.api.PUT('/conversations/{conversation_id}/secrets', {
      params: { path: { conversation_id: conversation.id } },
      body: { secrets: { CONVERSATION_KEY: 'conversation-canary' } },
    });
    await unwrap(asUser.api.GET('/conversations/{conversation_id}/secrets', { params: { path: { conversation_id: conversation.id } } }));
    await asUser.api.DELETE('/conversations/{conversation_id}/secrets/{alias}', {
      params: { path: { conversation_id: conversation.id, alias: 'CONVERSATION_KEY' } },
    });
    const stream = asUser.sendMessage(conversation.id, { content: '[[reply: hello from the client]]' });
    const lines = await collect(stream);
    expect(lines.filter(isTerminal)).toHaveLength(1);
    expect(lines.at(-1)).toMatchObject({ type: 'result' });
    const replay = await collect(asUser.attach(conversation.id, stream.messageId!, 0));
    expect(replay).toEqual(lines);
    const messages = await unwrap(
      asUser.api.GET('/conversations/{conversation_id}/messages', { params: { path: { conversation_id: conversation.id } } }),
    );
    expect(messages.data.map((m) => m.role)).toEqual(['assistant', 'user']);
    await unwrap(
      acis.api.GET('/conversations/by-external-id/{external_id}', {
        params: { path: { external_id: conversationEid }, query: { tenant_id: tenant.id } },
      }),
    );
    await acis.api.PATCH('/conversations/{conversation_id}', {
      params: { path: { conversation_id: conversation.id } },
      body: { title: 'Renamed' },
    });
    expect(
      (await unwrap(acis.api.GET('/conversations/{conversation_id}', { params: { path: { conversation_id: conversation.id } } }))).title,
    ).toBe('Renamed');

    // Approvals: the agent raises two; one is approved, one denied, each with a signed assertion.
    const approverKey = await unwrap(
      admin.api.POST('/admin/tenants/{tenant_id}/approver-keys', {
        params: { path: { tenant_id: tenant.id } },
        body: { algorithm: 'hmac-sha256' },
      }),
    );
    const second = (await unwrap(acis.api.POST('/conversations', { body: { user_id: user.id } }))) as Conversation;
    for (const [conversationId, decision] of [
      [conversation.id, 'approve'],
      [second.id, 'deny'],
    ] as const) {
      const raise = `[[tool:${APPROVAL_TOOL} ${JSON.stringify({ reason: 'Deploy', requested_items: [{ kind: 'action', description: 'deploy' }] })}]]`;
      const run = acis.sendMessage(conversationId, { content: raise });
      let approvalId: string | undefined;
      const decided: StreamLine[] = [];
      for await (const line of run) {
        decided.push(line);
        if (line.object === 'platform.event' && line.type === 'approval' && !approvalId) {
          approvalId = (line.approval as { id: string }).id;
          const signature = hmacAssertion(approvalId, decision, { id: approverKey.id, secret: approverKey.secret! });
          expect((await unwrap(acis.api.GET('/approvals/{approval_id}', { params: { path: { approval_id: approvalId } } }))).status).toBe(
            'pending',
          );
          if (decision === 'approve') {
            await acis.api.POST('/approvals/{approval_id}/approve', { params: { path: { approval_id: approvalId } }, body: { signature } });
          } else {
            await acis.api.POST('/approvals/{approval_id}/deny', { params: { path: { approval_id: approvalId } }, body: { signature } });
          }
        }
      }
      expect(approvalId).toBeDefined();
      expect(decided.filter(isTerminal)).toHaveLength(1);
      const listed = await unwrap(
        acis.api.GET('/conversations/{conversation_id}/approvals', { params: { path: { conversation_id: conversationId } } }),
      );
      expect(listed.data[0]).toMatchObject({ id: approvalId, status: decision === 'approve' ? 'approved' : 'denied' });
    }
    await admin.api.DELETE('/admin/approver-keys/{approver_key_id}', { params: { path: { approver_key_id: approverKey.id } } });

    // Listings walked both ways.
    const more = [];
    for (let i = 0; i < 5; i++) more.push((await unwrap(acis.api.POST('/conversations', { body: { user_id: user.id } }))) as Conversation);
    const older = [];
    for await (const c of paginate((cursor) =>
      unwrap(acis.api.GET('/conversations', { params: { query: { user_id: user.id, limit: 2, ...cursor } } })),
    )) {
      older.push(c.id);
    }
    const all = await unwrap(acis.api.GET('/conversations', { params: { query: { user_id: user.id, limit: 100 } } }));
    expect(older).toEqual(all.data.map((c) => c.id));
    const newer = [];
    const oldest = older.at(-1)!;
    for await (const c of paginate(
      (cursor) => unwrap(acis.api.GET('/conversations', { params: { query: { user_id: user.id, limit: 2, ...cursor } } })),
      { direction: 'newer', from: oldest },
    )) {
      newer.push(c.id);
    }
    expect(newer).toEqual(older.slice(0, -1).reverse());
    await unwrap(acis.api.GET('/tenants', { params: { query: { limit: 5 } } }));
    await unwrap(acis.api.GET('/tenants/{tenant_id}/users', { params: { path: { tenant_id: tenant.id } } }));
    await unwrap(acis.api.GET('/tenants/{tenant_id}/roles', { params: { path: { tenant_id: tenant.id } } }));
    await unwrap(acis.api.GET('/repositories'));
    await unwrap(acis.api.GET('/credentials'));

    // Removals by external id and by id.
    await acis.api.DELETE('/conversations/by-external-id/{external_id}', {
      params: { path: { external_id: conversationEid }, query: { tenant_id: tenant.id } },
    });
    await acis.api.DELETE('/conversations/{conversation_id}', { params: { path: { conversation_id: second.id } } });
    await acis.api.DELETE('/users/{user_id}', { params: { path: { user_id: user.id } } });
    const webhook = await acis.api.POST('/webhooks/github', { body: { zen: 'hi' } }).catch((error: unknown) => error);
    expect(webhook).toBeInstanceOf(AcisProblem);
    expect((webhook as AcisProblem).slug).toBe('webhook-signature-invalid');
    await acis.api.DELETE('/tenants/by-external-id/{external_id}', { params: { path: { external_id: tenantEid } } });

    const called = new Set(
      sent.flatMap(({ method, path }) =>
        allRoutes
          .filter((route) => route.method.toUpperCase() === method && routePattern(route.path).test(path))
          .map((route) => route.operationId),
      ),
    );
    expect(
      allRoutes
        .map((route) => route.operationId)
        .filter((id) => !called.has(id))
        .sort(),
    ).toEqual([]);
  });

  it('throws problems as typed errors with their slug, status and fields', async () => {
    const acis = client(serviceKey);
    const error = await acis.api.POST('/tenants', { body: { name: '' } }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AcisProblem);
    expect(error).toMatchObject({ slug: 'validation-error', status: 422 });
    expect((error as AcisProblem).fields.map((field) => field.pointer)).toEqual(['/name']);
    const missing = await acis.api
      .GET('/users/{user_id}', { params: { path: { user_id: 'usr_missing' } } })
      .catch((caught: unknown) => caught);
    expect(missing).toMatchObject({ slug: 'not-found', status: 404 });
  });

  it('re-attaches a stream cut mid-run: the caller sees every line once, in order', async () => {
    const acis = client(serviceKey);
    const { user } = await provision(acis);
    const conversation = (await unwrap(acis.api.POST('/conversations', { body: { user_id: user.id } }))) as Conversation;
    let cut = false;
    // Cuts the first answer of the message's POST after its third line, as a dropped connection would.
    const cutting: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      const response = await recording(request.clone());
      if (cut || request.method !== 'POST' || !request.url.endsWith('/messages') || !response.body) return response;
      cut = true;
      return new Response(cutAfterLines(response.body, 3), { status: response.status, headers: response.headers });
    };
    const stream = client(serviceKey, cutting).sendMessage(conversation.id, {
      content: '[[slow: 50]][[reply: one two three four five six]]',
    });
    const lines = await collect(stream);
    expect(cut).toBe(true);
    expect(sent.some((request) => request.method === 'GET' && request.path.endsWith(`/messages/${stream.messageId}/stream`))).toBe(true);
    const stored = await collect(acis.attach(conversation.id, stream.messageId!, 0));
    expect(lines).toEqual(stored);
    expect(lines.filter(isTerminal)).toHaveLength(1);
  });

  it('retries a POST whose connection was cut after it was sent under the same Idempotency-Key: one resource', async () => {
    const acis = client(serviceKey);
    const externalId = unique('once');
    let dropped = 0;
    const keys: string[] = [];
    // Sends the first attempt to ACIS, then loses its answer: the tenant exists, the client does not know.
    const losing: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      keys.push(request.headers.get('idempotency-key') ?? '');
      const response = await recording(request);
      if (request.method === 'POST' && dropped === 0) {
        dropped += 1;
        await response.body?.cancel();
        throw new TypeError('fetch failed: connection reset');
      }
      return response;
    };
    const created = await unwrap(client(serviceKey, losing).api.POST('/tenants', { body: { name: externalId, external_id: externalId } }));
    expect(dropped).toBe(1);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    const found = await unwrap(acis.api.GET('/tenants/by-external-id/{external_id}', { params: { path: { external_id: externalId } } }));
    expect(found.id).toBe(created.id);
  });

  it('retries a 429 after its Retry-After and returns the answer that followed', async () => {
    const limited = await startTestServer({ ACIS_RATE_LIMIT_OTHER: '2', ACIS_RATE_LIMIT_WINDOW_SECONDS: '1' });
    try {
      const { serviceKey: key } = await limited.createIntegration('rate limited');
      const statuses: Array<{ status: number; at: number; retryAfter: string | null }> = [];
      const watching: typeof fetch = async (input, init) => {
        const response = await fetch(new Request(input, init));
        statuses.push({ status: response.status, at: Date.now(), retryAfter: response.headers.get('retry-after') });
        return response;
      };
      const acis = createAcisClient({ baseUrl: limited.url, token: key, fetch: watching });
      for (let i = 0; i < 3; i++) await unwrap(acis.api.GET('/integration'));
      const refused = statuses.findIndex((s) => s.status === 429);
      expect(refused, JSON.stringify(statuses)).toBeGreaterThanOrEqual(0);
      const retry = statuses[refused + 1]!;
      expect(retry.status).toBe(200);
      expect(retry.at - statuses[refused]!.at).toBeGreaterThanOrEqual(Number(statuses[refused]!.retryAfter) * 1000 - 50);
    } finally {
      await limited.stop();
    }
  });
});

/** The route's path as a pattern of request paths (`:name` is one segment). */
function routePattern(routePath: string): RegExp {
  return new RegExp(`^${routePath.replace(/:[A-Za-z0-9_]+/g, '[^/]+')}$`);
}

/** `body` up to its `count`th newline, then an error, as when the connection drops there. */
function cutAfterLines(body: ReadableStream<Uint8Array>, count: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let newlines = 0;
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) return controller.close();
      let end = value.length;
      for (let i = 0; i < value.length; i++) {
        if (value[i] === 10 && ++newlines === count) {
          end = i + 1;
          break;
        }
      }
      controller.enqueue(value.subarray(0, end));
      if (newlines >= count) {
        await reader.cancel();
        controller.error(new TypeError('terminated: other side closed'));
      }
    },
  });
}
