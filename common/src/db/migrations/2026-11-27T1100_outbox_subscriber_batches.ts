import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// One outbox entry per import batch (issue 36): kind `subscribers` names the batch's subscribers in `subjects`
// instead of one `subscriber` row each, so a batch of 2,000 subscribers writes one row (and its three index entries)
// rather than 2,000. The relay publishes an entry's subscribers from the current Postgres state, as for `subscriber`.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE outbox ADD COLUMN subjects text[];
    ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check, DROP CONSTRAINT outbox_check;
    ALTER TABLE outbox
      ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('catalog', 'subscriber', 'subscribers', 'auth', 'arrangement')),
      ADD CONSTRAINT outbox_check CHECK ((kind = 'subscriber') = (subject IS NOT NULL)),
      ADD CONSTRAINT outbox_subjects_check CHECK ((kind = 'subscribers') = (subjects IS NOT NULL));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM outbox WHERE kind = 'subscribers';
    ALTER TABLE outbox DROP CONSTRAINT outbox_subjects_check, DROP CONSTRAINT outbox_kind_check;
    ALTER TABLE outbox DROP COLUMN subjects;
    ALTER TABLE outbox
      ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('catalog', 'subscriber', 'auth', 'arrangement'));
  `.execute(db);
}
