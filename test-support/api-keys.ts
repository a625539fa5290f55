import type { Kysely } from 'kysely';
import { generateApiKey } from '@ent/common/auth/api-key';
import type { Role, Scope } from '@ent/common/auth/scopes';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

/**
 * A key with exactly these scopes, on a new service account with this role, made straight in the database
 * so scope tests do not depend on the key routes.
 */
export async function createKeyWithScopes(
  db: Kysely<Database>,
  organizationId: string,
  scopes: Scope[],
  role: Role = 'admin',
): Promise<{ apiKey: string; memberId: string; serviceAccountId: string; keyId: string }> {
  const memberId = newId('mem');
  const serviceAccountId = newId('sa');
  const keyId = newId('key');
  const key = generateApiKey();
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('members')
      .values({ id: memberId, organization_id: organizationId, kind: 'service_account', name: 'test', role })
      .execute();
    await trx
      .insertInto('service_accounts')
      .values({ id: serviceAccountId, organization_id: organizationId, member_id: memberId, name: `sa ${role}` })
      .execute();
    await trx
      .insertInto('api_keys')
      .values({
        id: keyId,
        organization_id: organizationId,
        service_account_id: serviceAccountId,
        name: 'test',
        key_prefix: key.prefix,
        key_hash: key.hash,
        scopes,
      })
      .execute();
  });
  return { apiKey: key.plaintext, memberId, serviceAccountId, keyId };
}
