import type { Vault } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import type { SecretScope } from '../core/db/schema.js';
import { approverKeyContext } from '../admin/admin.service.js';
import { credentialSecretContext } from '../credentials/credentials.service.js';
import { secretContext } from './secrets.service.js';

const BATCH = 500;

/** Rows re-encrypted, per table (no key is named `secrets`: the logger redacts such keys). */
export interface RotationReport {
  scopedSecrets: number;
  credentials: number;
  approverKeys: number;
}

/**
 * Re-encrypts every vaulted value still under a previous master key with the current one
 * (`ACIS_MASTER_KEY`, with the old keys in `ACIS_MASTER_KEY_PREVIOUS`), so the old keys can then be
 * dropped. Each row is rewritten only if it still holds the ciphertext that was read, so a value
 * written meanwhile is never overwritten with an older one. Safe to run while the service serves
 * and to run again.
 */
export async function reencryptVaultedValues(db: Db, vault: Vault): Promise<RotationReport> {
  // The current key's id, as every new ciphertext names it (`v1.<key id>.<payload>`).
  const currentKeyId = vault.encrypt('', 'probe').split('.')[1];
  const stale = (ciphertext: string) => ciphertext.split('.')[1] !== currentKeyId;
  const reseal = (ciphertext: string, context: string) => vault.encrypt(vault.decrypt(ciphertext, context), context);

  const report: RotationReport = { scopedSecrets: 0, credentials: 0, approverKeys: 0 };

  let after: { scope: SecretScope; scope_id: string; alias: string } | undefined;
  for (;;) {
    const cursor = after;
    const rows = await db
      .selectFrom('secrets')
      .select(['scope', 'scope_id', 'alias', 'value_ciphertext', 'allowed_hosts'])
      .$if(cursor !== undefined, (q) =>
        q.where((eb) => eb(eb.refTuple('scope', 'scope_id', 'alias'), '>', eb.tuple(cursor!.scope, cursor!.scope_id, cursor!.alias))),
      )
      .orderBy('scope')
      .orderBy('scope_id')
      .orderBy('alias')
      .limit(BATCH)
      .execute();
    for (const row of rows.filter((r) => stale(r.value_ciphertext))) {
      const context = secretContext({ scope: row.scope, id: row.scope_id }, row.alias, row.allowed_hosts);
      const result = await db
        .updateTable('secrets')
        .set({ value_ciphertext: reseal(row.value_ciphertext, context) })
        .where('scope', '=', row.scope)
        .where('scope_id', '=', row.scope_id)
        .where('alias', '=', row.alias)
        .where('value_ciphertext', '=', row.value_ciphertext)
        .executeTakeFirst();
      report.scopedSecrets += Number(result.numUpdatedRows);
    }
    if (rows.length < BATCH) break;
    after = rows.at(-1);
  }

  report.credentials = await resealById(db, 'credentials', (id) => credentialSecretContext(id), stale, reseal);
  // The context approver keys are sealed under (admin.service.ts).
  report.approverKeys = await resealById(db, 'approver_keys', approverKeyContext, stale, reseal);
  return report;
}

async function resealById(
  db: Db,
  table: 'credentials' | 'approver_keys',
  contextOf: (id: string) => string,
  stale: (ciphertext: string) => boolean,
  reseal: (ciphertext: string, context: string) => string,
): Promise<number> {
  let count = 0;
  let after = '';
  for (;;) {
    const rows = await db
      .selectFrom(table)
      .select(['id', 'secret_ciphertext'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    for (const row of rows) {
      if (row.secret_ciphertext === null || !stale(row.secret_ciphertext)) continue;
      const result = await db
        .updateTable(table)
        .set({ secret_ciphertext: reseal(row.secret_ciphertext, contextOf(row.id)) })
        .where('id', '=', row.id)
        .where('secret_ciphertext', '=', row.secret_ciphertext)
        .executeTakeFirst();
      count += Number(result.numUpdatedRows);
    }
    if (rows.length < BATCH) return count;
    after = rows.at(-1)!.id;
  }
}
