import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import { ndjson, refusals, runImport } from './run-import.ts';

/**
 * Plan lines' `archived` (issue 36): true archives the plan at the import's end, after the import's subscriptions
 * to it (as they were made before it was archived); false unarchives it at once; a plan archived before the import
 * takes no new subscription from it, as POST .../subscriptions refuses one.
 */
let ctx: AdminTestContext;

beforeAll(async () => {
  // Batches of 3 lines: the subscriptions come batches after their plan's line.
  ctx = await createAdminContext({ imports: { runner: { batchSize: 3 } } });
});
afterAll(() => ctx.close());

const plan = (fields: Record<string, unknown> = {}) => ({
  type: 'plan',
  key: 'legacy',
  name: 'Legacy',
  kind: 'catalog',
  grants: [],
  ...fields,
});
const subscribed = (n: number) =>
  Array.from({ length: n }, (_, i) => [
    { type: 'subscriber', subscriber_id: `cus_${i}` },
    { type: 'subscription', subscriber_id: `cus_${i}`, plan_id: 'legacy' },
  ]).flat();

describe('plan lines with archived', () => {
  it('archives the plan after its subscriptions, whichever batch they are in; again: unchanged', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson([plan({ archived: true }), ...subscribed(4)]);
    expect(await runImport(ctx, org, body)).toMatchObject({ status: 'succeeded', applied: 9, failed: 0 });
    const row = await ctx.db
      .selectFrom('plans')
      .select('archived_at')
      .where('organization_id', '=', org.organization_id)
      .where('key', '=', 'legacy')
      .executeTakeFirstOrThrow();
    expect(row.archived_at).not.toBeNull();
    const subs = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/cus_3/subscriptions',
      headers: org.headers,
    });
    expect(subs.json().subscriptions).toMatchObject([{ plan_id: 'legacy', status: 'active' }]);

    // The same file again: the subscriptions exist, the plan is archived: nothing to do.
    expect(await runImport(ctx, org, body)).toMatchObject({ applied: 0, unchanged: 9, failed: 0 });
    // A new subscriber to the plan it archived before: refused as the route refuses it.
    const late = await runImport(ctx, org, ndjson([plan({ archived: true }), ...subscribed(5).slice(8)]));
    expect(refusals(late)).toEqual([[3, 'CONFLICT', 'plan_id']]);
  });

  it('unarchives with archived false at once, so its subscriptions are taken', async () => {
    const org = await createTestOrganization(ctx.db);
    await runImport(ctx, org, ndjson([plan({ archived: true })]));
    const done = await runImport(ctx, org, ndjson([plan({ archived: false }), ...subscribed(1)]));
    expect(done).toMatchObject({ applied: 3, failed: 0 });
    const row = await ctx.db
      .selectFrom('plans')
      .select('archived_at')
      .where('organization_id', '=', org.organization_id)
      .executeTakeFirstOrThrow();
    expect(row.archived_at).toBeNull();
  });

  it('leaves the plan as it is when the last line that names archived is false, or on a dry run', async () => {
    const org = await createTestOrganization(ctx.db);
    const done = await runImport(
      ctx,
      org,
      ndjson([
        plan({ archived: true }),
        ...subscribed(2),
        plan({ archived: false }),
        plan({ name: 'Renamed' }),
      ]),
    );
    expect(done).toMatchObject({ status: 'succeeded', failed: 0 });
    const dry = await createTestOrganization(ctx.db);
    expect(await runImport(ctx, dry, ndjson([plan({ archived: true })]), '?dry_run=true')).toMatchObject({
      status: 'succeeded',
      applied: 1,
    });
    for (const [organizationId, expected] of [
      [org.organization_id, [{ name: 'Renamed', archived_at: null }]],
      [dry.organization_id, []],
    ] as const) {
      const rows = await ctx.db
        .selectFrom('plans')
        .select(['name', 'archived_at'])
        .where('organization_id', '=', organizationId)
        .execute();
      expect(rows).toEqual(expected);
    }
  });
});
