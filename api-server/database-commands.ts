/**
 * `acis migrate` and `acis rotate-secrets`: one-shot commands against the database, run before or
 * beside the API servers. Each opens a single connection and closes it however it ends.
 */
import { loadConfig } from './config.js';
import { createVault, loadMasterKey, parseMasterKey } from './core/crypto.js';
import { migrateToLatest, openDatabase } from './core/db/database.js';
import { reencryptVaultedValues } from './secrets/rotation.js';
import { createLogger } from './server.js';

export async function migrate(): Promise<number> {
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

export async function rotateSecrets(): Promise<number> {
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
