import { sql, type Transaction } from 'kysely';
import type { Database } from '@ent/common/db/database';

/** How many features and plans the organization has, and how many plan grants (optionally but one plan's). */
export function catalogSizeStore(trx: Transaction<Database>, organizationId: string) {
  const rowsOf = async (table: 'features' | 'plans') =>
    (
      await trx
        .selectFrom(table)
        .select(sql<number>`count(*)::int`.as('count'))
        .where('organization_id', '=', organizationId)
        .executeTakeFirstOrThrow()
    ).count;
  return {
    features: () => rowsOf('features'),
    plans: () => rowsOf('plans'),
    async grants(exceptPlanId?: string) {
      let query = trx
        .selectFrom('plan_grants as g')
        .innerJoin('plans as p', 'p.id', 'g.plan_id')
        .select(sql<number>`count(*)::int`.as('count'))
        .where('p.organization_id', '=', organizationId);
      if (exceptPlanId !== undefined) query = query.where('g.plan_id', '!=', exceptPlanId);
      return (await query.executeTakeFirstOrThrow()).count;
    },
  };
}
