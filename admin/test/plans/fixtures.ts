import { afterAll, beforeAll, expect } from 'vitest';
import type { FastifyRequest } from 'fastify';
import { newId } from '@ent/common/ids';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import type { WriteOutcome } from '../../src/features/shared/write/outcome.ts';

export type Json = Record<string, unknown>;
type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** The four features every plan test's organization starts with. */
const FEATURES = [
  ['sso', 'flag'],
  ['seats', 'limit'],
  ['api-calls', 'limit'],
  ['audit-log', 'flag'],
] as const;

/** Plans most cases start from: `pro` (three grants), `free` (none), `acme_custom` (custom, seats 0). */
export const STANDARD_PLANS: Json[] = [
  {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 10 },
      { feature: 'api-calls', kind: 'limit', limit: null },
    ],
  },
  { key: 'free', name: 'Free', kind: 'catalog' },
  {
    key: 'acme_custom',
    name: 'Acme deal',
    kind: 'custom',
    grants: [{ feature: 'seats', kind: 'limit', limit: 0 }],
  },
];

/**
 * One admin app per test file; every case gets an organization of its own (`world()`), so cases share no
 * state and run in any order.
 */
export function planSuite() {
  let ctx: AdminTestContext;
  const writes: { organizationId: string | undefined; write: WriteOutcome }[] = [];
  beforeAll(async () => {
    ctx = await createAdminContext();
    ctx.app.writePipeline.onCommitted(async (request: FastifyRequest, write: WriteOutcome) => {
      writes.push({ organizationId: request.principal?.organizationId, write });
    });
  });
  afterAll(() => ctx.close());

  /** A fresh organization with the four features (and, with `plans`, the standard plans). */
  async function world(options: { plans?: boolean; features?: readonly (readonly [string, string])[] } = {}) {
    const org: TestOrganization = await createTestOrganization(ctx.db, 'Plans org');
    const inject = (method: Method, url: string, payload?: unknown, headers = org.headers) =>
      ctx.app.inject({
        method,
        url,
        headers,
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
    const createPlan = (payload: Json, headers = org.headers) =>
      inject('POST', '/org/plans', payload, headers);
    for (const [key, kind] of options.features ?? FEATURES) {
      expect((await inject('POST', '/org/features', { key, name: key, kind })).statusCode).toBe(201);
    }
    if (options.plans) {
      for (const plan of STANDARD_PLANS) expect((await createPlan(plan)).statusCode).toBe(201);
    }
    const ownWrites = () => writes.filter((w) => w.organizationId === org.organization_id);
    const planId = async (key: string) =>
      (
        await ctx.db
          .selectFrom('plans')
          .select('id')
          .where('organization_id', '=', org.organization_id)
          .where('key', '=', key)
          .executeTakeFirstOrThrow()
      ).id;
    return {
      ctx,
      org,
      inject,
      createPlan,
      planId,
      catalogVersion: async () =>
        (
          await ctx.db
            .selectFrom('organizations')
            .select('catalog_version')
            .where('id', '=', org.organization_id)
            .executeTakeFirstOrThrow()
        ).catalog_version,
      /** The last committed write of this organization, as the write pipeline reported it. */
      lastWrite: () => ownWrites().at(-1)!.write,
      writeCount: () => ownWrites().length,
      /** A subscriber with a subscription of `plan` in `status`, written directly. */
      async subscribe(plan: string, status: 'active' | 'canceled') {
        const subscriberId = `cust-${status}-${plan}`;
        await ctx.db
          .insertInto('subscribers')
          .values({ organization_id: org.organization_id, subscriber_id: subscriberId, name: null })
          .execute();
        await ctx.db
          .insertInto('subscriptions')
          .values({
            id: newId('sub'),
            organization_id: org.organization_id,
            subscriber_id: subscriberId,
            plan_id: await planId(plan),
            status,
            canceled_at: status === 'canceled' ? new Date() : null,
          })
          .execute();
      },
    };
  }

  return { world, context: () => ctx };
}

export const tick = () => new Promise((resolve) => setTimeout(resolve, 5));
