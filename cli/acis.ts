#!/usr/bin/env node
/**
 * The `acis` command: the process entry of every ACIS process but the runner and the standalone
 * egress proxy. It only dispatches: each command lives in its own component, loaded only when it
 * runs (so `acis serve` never loads the controller's code).
 */
import { ConfigError } from '../api-server/config.js';
import { admin, UsageError } from './admin.js';

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
      return (await import('../api-server/serve.js')).serve();
    case 'migrate':
      return (await import('../api-server/database-commands.js')).migrate();
    case 'rotate-secrets':
      return (await import('../api-server/database-commands.js')).rotateSecrets();
    case 'controller':
      return (await import('../controller/main.js')).runController();
    case 'sync-repository':
      return (await import('../api-server/repositories/sync-job.js')).runSyncJob(argv[1]);
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

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) {
      console.error(error.message ? `${error.message}\n${USAGE}` : USAGE);
      process.exit(2);
    }
    console.error(error instanceof ConfigError ? error.message : error);
    process.exit(1);
  },
);
