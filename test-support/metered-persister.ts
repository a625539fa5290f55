import type { MeteredPersisterDeps } from '../admin/src/features/metered-usage/persister.ts';
import type { AdminTestContext } from './admin-context.ts';

const silent: MeteredPersisterDeps['log'] = { warn: () => {}, error: () => {} };

/** What the worker's metered persister runs on, from the test's admin (its clock included); silent unless given a log. */
export const meteredPersisterDeps = (ctx: AdminTestContext, log = silent): MeteredPersisterDeps => ({
  db: ctx.db,
  redis: ctx.redis,
  redisKeys: ctx.app.redisKeys,
  clock: ctx.clock,
  queues: ctx.app.queues,
  log,
});
