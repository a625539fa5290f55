import { expect } from 'vitest';
import type { ManualClock } from '@ent/common/clock';
import type { Config } from '@ent/common/config';
import { saveArrangement } from '@ent/common/metering/arrangement';
import type { MeteredCheckResult } from '@ent/contract/evals';
import type { GatewayApp } from '../gateway/src/app.ts';
import { gatewayOverAdmin, injector } from '../gateway/test/helpers.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from './admin-context.ts';
import { caller } from './identity-context.ts';

/** A request admin answers 201 to: the path and the JSON body of a POST. */
export type CreateRequest = readonly [url: string, payload: object];

/** The requests that make each granted feature metered, a catalog plan granting them, and the subscriber on it. */
export function meteredPlanRequests(
  subscriberId: string,
  plan: string,
  grants: { feature: string; limit: number | null; rollover?: { max: number } }[],
): CreateRequest[] {
  return [
    ...grants.map(({ feature }): CreateRequest => [
      '/org/features',
      { key: feature, name: feature, kind: 'metered' },
    ]),
    [
      '/org/plans',
      {
        key: plan,
        name: plan,
        kind: 'catalog',
        grants: grants.map((grant) => ({ ...grant, kind: 'metered' })),
      },
    ],
    ['/org/subscribers', { subscriber_id: subscriberId }],
    [`/org/subscribers/${subscriberId}/subscriptions`, { plan_id: plan }],
  ];
}

export interface GatewaysOverAdmin {
  ctx: AdminTestContext;
  org: TestOrganization;
  gateways: GatewayApp[];
  /** Calls to admin as the organization. */
  api: ReturnType<typeof caller>;
  /** POSTs each request to admin as the organization, in order, each expected to answer 201. */
  create(requests: readonly CreateRequest[]): Promise<void>;
  /** A check of `feature` for the subscriber on gateway `index`, expected to answer 200: its answer. */
  check(index: number, subscriberId: string, feature: string, body?: object): Promise<MeteredCheckResult>;
  /** Closes the gateways, then admin (its database and Redis keys). */
  close(): Promise<void>;
}

/**
 * An admin app on its own database and Redis prefix, `gateways` gateway apps over it sharing its clock, and one
 * organization whose arrangement never limits the tests' evals (none of them is about the eval allowance).
 */
export async function gatewaysOverAdmin(options: {
  clock: ManualClock;
  organizationName: string;
  gateways: number;
  gatewayConfig?: Partial<Config>;
}): Promise<GatewaysOverAdmin> {
  const ctx = await createAdminContext({ clock: options.clock });
  const gateways: GatewayApp[] = [];
  const close = async () => {
    for (const gateway of gateways) await gateway.close();
    await ctx.close();
  };
  try {
    for (let i = 0; i < options.gateways; i++)
      gateways.push(await gatewayOverAdmin(ctx, { clock: options.clock, config: options.gatewayConfig }));
    const org = await createTestOrganization(ctx.db, options.organizationName);
    await saveArrangement(ctx.db, org.organization_id, {
      plan: 'free',
      evalLimit: 1_000_000,
      blocking: true,
      burstPerSecond: 10_000,
    });
    const api = caller(ctx, org.api_key);
    return {
      ctx,
      org,
      gateways,
      api,
      async create(requests) {
        for (const [url, payload] of requests) {
          const res = await api.post(url, payload);
          expect(res.statusCode, res.body).toBe(201);
        }
      },
      async check(index, subscriberId, feature, body = {}) {
        const res = await injector(gateways[index]!)({
          method: 'POST',
          url: `/org/subscribers/${subscriberId}/entitlements/check`,
          headers: org.headers,
          payload: { feature, ...body },
        });
        expect(res.statusCode, JSON.stringify(res.json())).toBe(200);
        return res.json() as MeteredCheckResult;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
