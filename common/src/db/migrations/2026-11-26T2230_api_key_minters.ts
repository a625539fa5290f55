import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Who minted each API key, so that offboarding a person revokes what they could have copied (decisions.md,
// "Offboarding: keys a member minted"). `minted_by_member_id` is the person: the member of the console session that
// created the key, or, for a key created with another key, that key's own `minted_by_member_id` (whoever held the
// creating key saw the new one). `minted_with_key_id` is the key that created it (null: a console session). Both are
// null on keys created before this migration and on the key provisioning creates: no person is known to have seen
// them. Adding nullable columns without defaults rewrites nothing; the partial index serves the removal's lookup of
// the member's live keys and the member's minted-key list.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE api_keys
      ADD COLUMN minted_by_member_id text,
      ADD COLUMN minted_with_key_id text REFERENCES api_keys (id),
      ADD FOREIGN KEY (organization_id, minted_by_member_id) REFERENCES members (organization_id, id);
    CREATE INDEX api_keys_minted_by ON api_keys (minted_by_member_id, id) WHERE minted_by_member_id IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX api_keys_minted_by;
    ALTER TABLE api_keys DROP COLUMN minted_with_key_id, DROP COLUMN minted_by_member_id;
  `.execute(db);
}
