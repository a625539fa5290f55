import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/** Per-organization catalog limits (CATALOG_MAX_FEATURES, _PLANS, _GRANTS), small here so they are reached. */
let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext({ config: { catalogLimits: { features: 3, plans: 2, grants: 4 } } });
});
afterAll(() => ctx.close());

const call = (org: TestOrganization, method: 'POST' | 'PATCH', url: string, payload: object) =>
  ctx.app.inject({ method, url, headers: org.headers, payload });

const expectLimit = (
  res: { statusCode: number; json(): { error: unknown } },
  field: string,
  value: number,
) => {
  expect(res.statusCode).toBe(422);
  expect(res.json().error).toMatchObject({
    code: 'VALIDATION_ERROR',
    type: 'invalid_request_error',
    details: { field, value },
  });
};

const catalogVersion = async (org: TestOrganization) =>
  (
    await ctx.db
      .selectFrom('organizations')
      .select('catalog_version')
      .where('id', '=', org.organization_id)
      .executeTakeFirstOrThrow()
  ).catalog_version;

describe('catalog size limits', () => {
  it('refuses the feature past CATALOG_MAX_FEATURES with 422, changes nothing, and audits the refusal', async () => {
    const org = await createTestOrganization(ctx.db, 'Features org');
    for (const key of ['a', 'b', 'c']) {
      expect((await call(org, 'POST', '/org/features', { key, name: key, kind: 'flag' })).statusCode).toBe(
        201,
      );
    }
    const version = await catalogVersion(org);
    const refused = await call(org, 'POST', '/org/features', { key: 'd', name: 'd', kind: 'flag' });
    expectLimit(refused, 'features', 3);
    expect(refused.json().error.message).toContain('CATALOG_MAX_FEATURES');
    expect(await catalogVersion(org)).toBe(version);
    const features = await ctx.app.inject({ method: 'GET', url: '/org/features', headers: org.headers });
    expect(features.json().features.map((f: { key: string }) => f.key)).toEqual(['a', 'b', 'c']);
    const audit = await ctx.app.inject({
      method: 'GET',
      url: `/org/audit-events?request_id=${refused.headers['x-request-id']}`,
      headers: org.headers,
    });
    expect(audit.json().audit_events).toHaveLength(1);
    expect(audit.json().audit_events[0]).toMatchObject({
      status: 422,
      outcome: 'responded',
      route: '/org/features',
    });
  });

  it('counts per organization: another organization still has all its room', async () => {
    const other = await createTestOrganization(ctx.db, 'Other org');
    for (const key of ['a', 'b', 'c']) {
      expect((await call(other, 'POST', '/org/features', { key, name: key, kind: 'limit' })).statusCode).toBe(
        201,
      );
    }
  });

  it('refuses a plan past CATALOG_MAX_PLANS, and grants past CATALOG_MAX_GRANTS on create and on update', async () => {
    const org = await createTestOrganization(ctx.db, 'Plans org');
    for (const key of ['a', 'b', 'c'])
      await call(org, 'POST', '/org/features', { key, name: key, kind: 'flag' });
    const grants = (keys: string[]) => keys.map((feature) => ({ feature, kind: 'flag' }));
    const plan = (key: string, keys: string[]) =>
      call(org, 'POST', '/org/plans', { key, name: key, kind: 'catalog', grants: grants(keys) });

    expect((await plan('one', ['a', 'b', 'c'])).statusCode).toBe(201);
    expectLimit(await plan('two', ['a', 'b']), 'grants', 4);
    expect((await plan('two', ['a'])).statusCode).toBe(201);
    expectLimit(await plan('three', []), 'plans', 2);

    // Replacing a plan's grants counts its new grants instead of its old ones.
    const raise = await call(org, 'PATCH', '/org/plans/two', { grants: grants(['b']) });
    expect(raise.statusCode).toBe(200);
    expectLimit(await call(org, 'PATCH', '/org/plans/two', { grants: grants(['a', 'b']) }), 'grants', 4);
    expect((await call(org, 'PATCH', '/org/plans/one', { grants: grants(['a', 'c']) })).statusCode).toBe(200);
    expect((await call(org, 'PATCH', '/org/plans/two', { grants: grants(['a', 'b']) })).statusCode).toBe(200);
  });

  it('two concurrent creations cannot both take the last place', async () => {
    const org = await createTestOrganization(ctx.db, 'Race org');
    await call(org, 'POST', '/org/features', { key: 'a', name: 'a', kind: 'flag' });
    await call(org, 'POST', '/org/features', { key: 'b', name: 'b', kind: 'flag' });
    const results = await Promise.all(
      ['x', 'y', 'z'].map((key) => call(org, 'POST', '/org/features', { key, name: key, kind: 'flag' })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 422, 422]);
  });
});
