import type { Transaction } from 'kysely';
import type { Config } from '@ent/common/config';
import type { Database } from '@ent/common/db/database';
import { validationError } from '@ent/common/errors/app-error';
import { lockOrganization } from '../shared/write/locks.ts';
import { catalogSizeStore } from './catalog-size.store.ts';

export type CatalogLimits = Config['catalogLimits'];

/** What a catalog write adds: features, plans, or a plan's grants (replacing that plan's current ones). */
export type CatalogGrowth =
  { features: number } | { plans: number; grants: number } | { grants: number; replacingPlanId: string };

/** What the organization itself can do about each limit (features cannot be deleted; archived plans count). */
const REMEDY = {
  features: 'ask the operator to raise the limit',
  plans:
    'delete plans no subscription references (archived plans count too), or ask the operator to raise the limit',
  grants: 'remove grants from plans, or ask the operator to raise the limit',
} as const;

const tooLarge = (what: 'features' | 'plans' | 'grants', limit: number, setting: string) =>
  validationError(
    `This organization's catalog may hold at most ${limit} ${what === 'grants' ? 'plan grants in all' : what} ` +
      `(the server's ${setting}); ${REMEDY[what]}.`,
    { field: what, value: limit },
  );

/**
 * Every gateway holds each organization's whole catalog (and resolves every feature for each plan set), so its
 * size is bounded per organization. The organization's row is locked first: catalog writes already serialize on
 * it (bumpCatalogVersion), so two concurrent creations cannot both take the last place.
 */
export async function assertCatalogRoom(
  trx: Transaction<Database>,
  organizationId: string,
  limits: CatalogLimits,
  growth: CatalogGrowth,
): Promise<void> {
  await lockOrganization(trx, organizationId);
  const size = catalogSizeStore(trx, organizationId);
  if ('features' in growth) {
    if ((await size.features()) + growth.features > limits.features) {
      throw tooLarge('features', limits.features, 'CATALOG_MAX_FEATURES');
    }
    return;
  }
  if ('plans' in growth && (await size.plans()) + growth.plans > limits.plans) {
    throw tooLarge('plans', limits.plans, 'CATALOG_MAX_PLANS');
  }
  if (growth.grants === 0) return;
  const grants = await size.grants('replacingPlanId' in growth ? growth.replacingPlanId : undefined);
  if (grants + growth.grants > limits.grants) throw tooLarge('grants', limits.grants, 'CATALOG_MAX_GRANTS');
}
