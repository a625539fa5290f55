import type { Kysely } from 'kysely';
import {
  decryptSecret,
  encryptSecret,
  isEncryptedWithCurrentKey,
  type SecretsKeyring,
} from '../crypto/secrets.ts';
import type { Database } from '@ent/common/db/database';
import { tokenContext } from '../features/invites/service.ts';
import { secretContext } from '../features/webhook/service.ts';

export interface RotationCounts {
  /** Ciphertexts rewritten under the current key by this run. */
  reencrypted: number;
  /** Already under the current key: left as they were (a second run only counts these). */
  current: number;
}

export interface RotationResult {
  webhook_secrets: RotationCounts;
  invite_tokens: RotationCounts;
}

const PAGE = 200;

/** The stored ciphertext under the current key, or null when it already is. */
function reencrypted(stored: string, keyring: SecretsKeyring, context: string, what: string): string | null {
  if (isEncryptedWithCurrentKey(stored, keyring)) return null;
  try {
    return encryptSecret(decryptSecret(stored, keyring, context), keyring, context);
  } catch (error) {
    throw new Error(`${what}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Re-encrypts every stored secret (webhook current and previous secrets, live invite tokens) under the keyring's
 * current key. Each row is rewritten in its own transaction holding the row lock, so a concurrent rotation of a
 * webhook secret or a redeemed invite is never overwritten with an older value. Safe to run again: rows already
 * under the current key are not touched. A row no key decrypts stops the run (the rows before it stay done).
 */
export async function rotateSecrets(db: Kysely<Database>, keyring: SecretsKeyring): Promise<RotationResult> {
  const result: RotationResult = {
    webhook_secrets: { reencrypted: 0, current: 0 },
    invite_tokens: { reencrypted: 0, current: 0 },
  };
  const tally = (counts: RotationCounts, changed: string | null) =>
    changed === null ? (counts.current += 1) : (counts.reencrypted += 1);

  for (let after = ''; ;) {
    const page = await db
      .selectFrom('webhooks')
      .select('organization_id')
      .where('organization_id', '>', after)
      .orderBy('organization_id')
      .limit(PAGE)
      .execute();
    for (const { organization_id: organizationId } of page) {
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .selectFrom('webhooks')
          .select(['secret_ciphertext', 'previous_secret_ciphertext'])
          .where('organization_id', '=', organizationId)
          .forUpdate()
          .executeTakeFirst();
        if (!row) return;
        const context = secretContext(organizationId);
        const what = `webhook of ${organizationId}`;
        const secret = reencrypted(row.secret_ciphertext, keyring, context, what);
        const previous = row.previous_secret_ciphertext
          ? reencrypted(row.previous_secret_ciphertext, keyring, context, `${what} (previous secret)`)
          : null;
        tally(result.webhook_secrets, secret);
        if (row.previous_secret_ciphertext) tally(result.webhook_secrets, previous);
        if (secret === null && previous === null) return;
        await trx
          .updateTable('webhooks')
          .set({
            ...(secret === null ? {} : { secret_ciphertext: secret }),
            ...(previous === null ? {} : { previous_secret_ciphertext: previous }),
          })
          .where('organization_id', '=', organizationId)
          .execute();
      });
    }
    if (page.length < PAGE) break;
    after = page[page.length - 1]!.organization_id;
  }

  for (let after = ''; ;) {
    const page = await db
      .selectFrom('invites')
      .select('id')
      .where('id', '>', after)
      .where('token_ciphertext', 'is not', null)
      .orderBy('id')
      .limit(PAGE)
      .execute();
    for (const { id } of page) {
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .selectFrom('invites')
          .select('token_ciphertext')
          .where('id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        // Redeemed or revoked meanwhile: the ciphertext was cleared, nothing to keep.
        if (!row?.token_ciphertext) return;
        const token = reencrypted(row.token_ciphertext, keyring, tokenContext(id), `invite ${id}`);
        tally(result.invite_tokens, token);
        if (token !== null)
          await trx.updateTable('invites').set({ token_ciphertext: token }).where('id', '=', id).execute();
      });
    }
    if (page.length < PAGE) break;
    after = page[page.length - 1]!.id;
  }
  return result;
}
