import type { Kysely, Transaction } from 'kysely';
import { generateApiKey } from '@ent/common/auth/api-key';
import type { Database } from '@ent/common/db/database';
import { newId } from '@ent/common/ids';

export interface CreatedOrganization {
  organization_id: string;
  /** What the console's sign-in asks for as the organization. */
  slug: string;
  member_id: string;
  service_account_id: string;
  /** Plaintext, shown once; only its hash is stored. */
  api_key: string;
}

function slugFrom(name: string): string {
  const base = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return base || 'org';
}

/**
 * The organization row every way of making one shares (the operator's `entctl org create` and the console's
 * sign-up): a self-serve organization, arrangement `free` (its limits are the table's defaults).
 */
export async function insertOrganization(
  trx: Transaction<Database>,
  organization: { id: string; name: string; slug: string },
): Promise<void> {
  await trx
    .insertInto('organizations')
    .values({ ...organization, eval_plan: 'free' })
    .execute();
}

/**
 * A new self-serve organization with an admin service account holding one full-access key: what
 * `entctl org create` and `npm start`'s demo print.
 */
export async function createOrganization(db: Kysely<Database>, name: string): Promise<CreatedOrganization> {
  const organizationId = newId('org');
  const memberId = newId('mem');
  const serviceAccountId = newId('sa');
  const key = generateApiKey();
  const slug = `${slugFrom(name)}-${organizationId.slice(-6)}`;
  await db.transaction().execute(async (trx) => {
    await insertOrganization(trx, { id: organizationId, name, slug });
    await trx
      .insertInto('members')
      // DESIGN.md §4: the organization's service account "is `admin`": named and ranked so, one name for the
      // member and the account it is.
      .values({
        id: memberId,
        organization_id: organizationId,
        kind: 'service_account',
        name: 'admin',
        role: 'admin',
      })
      .execute();
    await trx
      .insertInto('service_accounts')
      .values({
        id: serviceAccountId,
        organization_id: organizationId,
        member_id: memberId,
        name: 'admin',
      })
      .execute();
    await trx
      .insertInto('api_keys')
      .values({
        id: newId('key'),
        organization_id: organizationId,
        service_account_id: serviceAccountId,
        name: 'bootstrap',
        key_prefix: key.prefix,
        key_hash: key.hash,
        scopes: [],
      })
      .execute();
  });
  return {
    organization_id: organizationId,
    slug,
    member_id: memberId,
    service_account_id: serviceAccountId,
    api_key: key.plaintext,
  };
}
