#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config.js';
import { createVault, loadMasterKey, parseMasterKey } from './core/crypto.js';
import { migrateToLatest, openDatabase } from './core/db/database.js';
import { reencryptVaultedValues } from './secrets/rotation.js';
import { createLogger, startServer } from './server.js';

const USAGE = `usage: acis <command> [options]

commands:
  serve                                     run the API server (the default)
  controller                                run the Kubernetes controller (Sandbox, SandboxWarmPool and RepositorySync resources)
  sync-repository REP_ID                    run one attempt of a claimed repository sync (what a RepositorySync's Job runs)
  migrate                                   apply database migrations and exit
  rotate-secrets                            re-encrypt vaulted values under ACIS_MASTER_KEY (old keys in
                                            ACIS_MASTER_KEY_PREVIOUS), so the old keys can be retired
  integrations create --name NAME           create an integration; prints its service key once
  service-keys create --integration ID      issue another service key for an integration
  service-keys revoke --id KEY_ID           revoke a service key
  approver-keys create --tenant ID --algorithm hmac-sha256|ed25519 [--public-key B64URL]
  approver-keys revoke --id APK_ID

Admin commands call the admin API of a running server: ACIS_URL (default http://127.0.0.1:8080)
with ACIS_ADMIN_TOKEN.`;

async function main(argv: string[]): Promise<number> {
  const [command = 'serve', sub, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve();
    case 'migrate':
      return migrate();
    case 'controller':
      // Loaded only here: the API server itself never needs the controller's code.
      return (await import('../controller/main.js')).runController();
    case 'sync-repository':
      return (await import('./repositories/sync-job.js')).runSyncJob(argv[1]);
    case 'rotate-secrets':
      return rotateSecrets();
    case 'integrations':
    case 'service-keys':
    case 'approver-keys':
      return admin(command, sub, rest);
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return 0;
    default:
      console.error(USAGE);
      return 2;
  }
}

/** A SIGINT this soon after the first signal is the same Ctrl-C, relayed, not a second one. */
const RELAYED_SIGINT_MS = 1000;

async function serve(): Promise<number> {
  const config = loadConfig();
  const server = await startServer(config);
  const { logger } = server.deps;
  let firstSignalAt: number | undefined;
  // The first signal shuts down gracefully (Kubernetes sends SIGTERM on every rollout); a second one
  // exits at once. Runners die with this process (bwrap --die-with-parent) and the runs it leaves
  // in progress are failed by the next node to start or to see its heartbeat stop.
  const onSignal = (signal: NodeJS.Signals, code: number) => {
    if (firstSignalAt !== undefined) {
      // A terminal's Ctrl-C reaches this process directly and once more relayed by npm or tsx.
      if (signal === 'SIGINT' && Date.now() - firstSignalAt < RELAYED_SIGINT_MS) return;
      logger.warn({ signal }, 'second signal: exiting at once');
      logger.flush();
      process.exit(code);
    }
    firstSignalAt = Date.now();
    logger.info({ signal, grace_seconds: config.shutdownGraceSeconds }, 'shutting down: no new messages; runs in progress may finish');
    server.shutdown(config.shutdownGraceSeconds * 1000).then(
      () => {
        logger.info('shut down');
        logger.flush();
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        logger.flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => onSignal('SIGINT', 130));
  process.on('SIGTERM', () => onSignal('SIGTERM', 143));
  return new Promise<number>(() => {}); // serve until a signal
}

async function migrate(): Promise<number> {
  const config = loadConfig();
  const logger = createLogger(config);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 1 });
  try {
    const applied = await migrateToLatest(database.db);
    logger.info({ migrations: applied }, applied.length ? 'migrations applied' : 'database is up to date');
    return 0;
  } finally {
    await database.close();
  }
}

async function rotateSecrets(): Promise<number> {
  const config = loadConfig();
  const logger = createLogger(config);
  const vault = createVault(await loadMasterKey(config.masterKey, config.dataDir), config.previousMasterKeys.map(parseMasterKey));
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 1 });
  try {
    const rotated = await reencryptVaultedValues(database.db, vault);
    logger.info({ rotated }, 'vaulted values re-encrypted under the current master key');
    return 0;
  } finally {
    await database.close();
  }
}

const ADMIN_OPTIONS = ['name', 'integration', 'tenant', 'algorithm', 'public-key', 'id'] as const;

async function admin(resource: string, action: string | undefined, args: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: withAttachedValues(args, ADMIN_OPTIONS),
      options: Object.fromEntries(ADMIN_OPTIONS.map((name) => [name, { type: 'string' as const }])),
    }));
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : err}\n${USAGE}`);
    return 2;
  }
  const request = adminRequest(resource, action, values);
  if (!request) {
    console.error(USAGE);
    return 2;
  }
  const baseUrl = (process.env.ACIS_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const response = await fetch(`${baseUrl}${request.path}`, {
    method: request.method,
    headers: {
      authorization: `Bearer ${process.env.ACIS_ADMIN_TOKEN ?? ''}`,
      ...(request.body && { 'content-type': 'application/json' }),
    },
    body: request.body && JSON.stringify(request.body),
  });
  const text = await response.text();
  if (text) console.log(text);
  return response.ok ? 0 : 1;
}

/**
 * `--option value` as `--option=value` for options that always take a value: a base64url key or an id
 * may begin with `-`, which parseArgs would otherwise refuse as a possible option.
 */
function withAttachedValues(args: string[], names: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (names.some((name) => arg === `--${name}`) && next !== undefined) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

function adminRequest(
  resource: string,
  action: string | undefined,
  v: Record<string, string | boolean | undefined>,
): { method: string; path: string; body?: object } | undefined {
  const enc = (value: string | boolean | undefined) => encodeURIComponent(String(value ?? ''));
  if (resource === 'integrations' && action === 'create' && v.name) {
    return { method: 'POST', path: '/admin/integrations', body: { name: v.name } };
  }
  if (resource === 'service-keys' && action === 'create' && v.integration) {
    return { method: 'POST', path: `/admin/integrations/${enc(v.integration)}/service-keys` };
  }
  if (resource === 'service-keys' && action === 'revoke' && v.id) {
    return { method: 'DELETE', path: `/admin/service-keys/${enc(v.id)}` };
  }
  if (resource === 'approver-keys' && action === 'create' && v.tenant && v.algorithm) {
    return {
      method: 'POST',
      path: `/admin/tenants/${enc(v.tenant)}/approver-keys`,
      body: { algorithm: v.algorithm, ...(v['public-key'] && { public_key: v['public-key'] }) },
    };
  }
  if (resource === 'approver-keys' && action === 'revoke' && v.id) {
    return { method: 'DELETE', path: `/admin/approver-keys/${enc(v.id)}` };
  }
  return undefined;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof ConfigError ? error.message : error);
    process.exit(1);
  },
);
