import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import pg from 'pg';
import { hashServiceKey } from '../../api-server/core/crypto.js';

/**
 * The floor servers the provisioning plane is measured against, each run as its own process by
 * provisioning-plane.ts (`floors.ts bare|one-query|routes`, PORT and DATABASE_URL from the environment):
 * - bare: Koa + @koa/router answering a small JSON body, the most a Node HTTP route can do here;
 * - one-query: the same route running one raw `SELECT 1` through a pg Pool sized like ACIS's
 *   default, the most any route that touches the database once can do here;
 * - routes: token exchange and the warm tenant upsert written plainly on that stack, against ACIS's
 *   own database: the service key's hash looked up once and kept, the body read and parsed, ACIS's
 *   statement as a named prepared statement, and the same answer (token exchange signs an HS256 JWT
 *   with node:crypto; the upsert sends the tenant's stored `api_json` when the body changes
 *   nothing, the only case it answers). They check nothing else (no request ids, metrics, rate
 *   limit, input schemas or problem documents), so they are what these routes' own work costs on
 *   this stack, whatever framework carries it.
 */
const FLOOR_KINDS = ['bare', 'one-query', 'routes'];

/** ACIS_DB_POOL_SIZE's default (api-server/config.ts), so both sides have the same connections. */
const POOL_SIZE = 20;

/** The statements ACIS runs for these routes (auth.service.ts, tenants.repository.ts). */
const EXCHANGE_SQL =
  'select "tenants"."id" as "tenant_id", "tenants"."status" as "tenant_status", "users"."id" as "user_id", "users"."status" as "user_status" ' +
  'from "tenants" inner join "users" on "users"."tenant_id" = "tenants"."id" ' +
  'where "tenants"."integration_id" = $1 and "tenants"."external_id" = $2 and "users"."external_id" = $3';

const TENANT_JSON_SQL = 'select "api_json" as "json" from "tenants" where "integration_id" = $1 and "external_id" = $2';

const TOKEN_TTL_SECONDS = 900;
const JWT_HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (error) {
        reject(error);
      }
    });
    request.on('error', reject);
  });
}

function plainRoutes(router: Router, pool: pg.Pool): void {
  const integrations = new Map<string, string | null>();
  const integrationOf = async (authorization: string): Promise<string | null> => {
    const keyHash = hashServiceKey(authorization.slice('Bearer '.length));
    let integrationId = integrations.get(keyHash);
    if (integrationId === undefined) {
      const { rows } = await pool.query<{ integration_id: string }>(
        'select integration_id from service_keys where key_hash = $1 and revoked_at is null',
        [keyHash],
      );
      integrationId = rows[0]?.integration_id ?? null;
      integrations.set(keyHash, integrationId);
    }
    return integrationId;
  };
  const signingKey = randomBytes(32);

  router.post('/auth/token-exchange', async (ctx) => {
    const integrationId = await integrationOf(ctx.get('authorization'));
    if (!integrationId) {
      ctx.status = 401;
      return;
    }
    const body = await readJson(ctx.req);
    const { rows } = await pool.query({
      name: 'token-exchange',
      text: EXCHANGE_SQL,
      values: [integrationId, body.tenant_external_id, body.user_external_id],
    });
    const row = rows[0];
    if (!row) {
      ctx.status = 404;
      return;
    }
    if (row.tenant_status === 'suspended' || row.user_status === 'suspended') {
      ctx.status = 403;
      return;
    }
    const issuedAt = Math.floor(Date.now() / 1000);
    const claims = {
      tid: row.tenant_id,
      iid: integrationId,
      iss: 'acis',
      aud: 'acis:conversations',
      sub: row.user_id,
      iat: issuedAt,
      exp: issuedAt + TOKEN_TTL_SECONDS,
      jti: randomBytes(12).toString('hex'),
    };
    const signingInput = `${JWT_HEADER}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    const signature = createHmac('sha256', signingKey).update(signingInput).digest('base64url');
    ctx.body = {
      object: 'token',
      token: `${signingInput}.${signature}`,
      token_type: 'Bearer',
      expires_at: new Date(claims.exp * 1000).toISOString(),
      tenant_id: row.tenant_id,
      user_id: row.user_id,
    };
  });

  router.put('/tenants/by-external-id/:externalId', async (ctx) => {
    const integrationId = await integrationOf(ctx.get('authorization'));
    if (!integrationId) {
      ctx.status = 401;
      return;
    }
    const body = await readJson(ctx.req);
    const { rows } = await pool.query<{ json: string }>({
      name: 'tenant-json',
      text: TENANT_JSON_SQL,
      values: [integrationId, ctx.params.externalId],
    });
    const stored = rows[0]?.json;
    if (stored === undefined) {
      ctx.status = 501;
      return;
    }
    const tenant = JSON.parse(stored) as Record<string, unknown>;
    const unchanged = Object.entries(body).every(([field, value]) => JSON.stringify(tenant[field]) === JSON.stringify(value));
    if (!unchanged) {
      ctx.status = 501;
      return;
    }
    ctx.type = 'application/json';
    ctx.body = stored;
  });
}

async function main(kind: string | undefined): Promise<void> {
  if (!kind || !FLOOR_KINDS.includes(kind)) throw new Error(`usage: floors.ts ${FLOOR_KINDS.join('|')}`);
  const port = Number(process.env.PORT);
  const pool = kind === 'bare' ? null : new pg.Pool({ connectionString: process.env.DATABASE_URL, max: POOL_SIZE });

  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/floor', async (ctx) => {
    if (pool) {
      const result = await pool.query<{ one: number }>('select 1 as one');
      ctx.body = { object: 'floor', value: result.rows[0]?.one };
    } else {
      ctx.body = { object: 'floor', value: 1 };
    }
  });
  if (kind === 'routes') plainRoutes(router, pool!);
  const app = new Koa();
  app.use(router.routes());
  const server = app.listen(port, '127.0.0.1');

  const stop = () => {
    server.close();
    server.closeAllConnections();
    void (pool?.end() ?? Promise.resolve()).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main(process.argv[2]).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
