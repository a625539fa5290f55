import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import { AppError } from '@ent/common/errors/app-error';
import { transact } from '@ent/common/outbox/record';
import { setPlanArchived } from '../plans/service.ts';
import { WriteOutcome } from '../shared/write/outcome.ts';

/**
 * Archives the plans an import's lines archive, through the archive route's service, in one transaction: true when
 * the catalog changed. A plan deleted since its line was applied has nothing left to archive.
 */
export function archiveImportedPlans(
  db: Kysely<Database>,
  organizationId: string,
  keys: readonly string[],
): Promise<boolean> {
  return transact(db, async (trx) => {
    let changed = false;
    for (const key of keys) {
      const outcome = new WriteOutcome();
      try {
        await setPlanArchived(trx, outcome, organizationId, key, true);
      } catch (error) {
        if (error instanceof AppError && error.status === 404) continue;
        throw error;
      }
      if (outcome.details !== null) changed = true;
    }
    return changed;
  });
}
