import Router from '@koa/router';
import Koa from 'koa';
import pg from 'pg';

/**
 * The floor servers the provisioning plane is measured against, each run as its own process by
 * run.ts (`floors.ts bare|one-query`, PORT and DATABASE_URL from the environment):
 * - bare: Koa + @koa/router answering a small JSON body, the most a Node HTTP route can do here;
 * - one-query: the same route running one raw `SELECT 1` through a pg Pool sized like ACIS's
 *   default, the most any route that touches the database once can do here.
 */
const FLOOR_KINDS = ['bare', 'one-query'];

/** ACIS_DB_POOL_SIZE's default (api-server/config.ts), so both sides have the same connections. */
const POOL_SIZE = 20;

async function main(kind: string | undefined): Promise<void> {
  if (!kind || !FLOOR_KINDS.includes(kind)) throw new Error(`usage: floors.ts ${FLOOR_KINDS.join('|')}`);
  const port = Number(process.env.PORT);
  const pool = kind === 'one-query' ? new pg.Pool({ connectionString: process.env.DATABASE_URL, max: POOL_SIZE }) : null;

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
