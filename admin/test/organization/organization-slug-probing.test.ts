import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManualClock,
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { SLUG_CONFLICTS_PER_HOUR } from '../../src/features/organization/routes.ts';

/** Slugs are public names in one namespace: "taken" is answered, but probing many of them is limited. */
const clock = new ManualClock(Date.UTC(2031, 0, 5, 9, 0, 0));
let ctx: AdminTestContext;
let prober: TestOrganization;
let target: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  prober = await createTestOrganization(ctx.db, 'Prober');
  target = await createTestOrganization(ctx.db, 'Acme');
});
afterAll(() => ctx.close());

const patch = (org: TestOrganization, payload: object) => ctx.app.inject({ method: 'PATCH', url: '/org', headers: org.headers, payload });
const auditedPatches = async (organizationId: string) =>
  (
    await ctx.ownerDb
      .selectFrom('audit_events')
      .select('id')
      .where('organization_id', '=', organizationId)
      .where('method', '=', 'PATCH')
      .execute()
  ).length;

describe('slug probing', () => {
  it('generated slugs carry part of the organization id, so a name alone does not find them', async () => {
    const fresh = await createTestOrganization(ctx.db, 'Acme');
    const res = await ctx.app.inject({ method: 'GET', url: '/org', headers: fresh.headers });
    expect(res.json().slug).toBe(`acme-${fresh.organization_id.slice(-6).toLowerCase()}`);
  });

  it(`answers "taken" ${SLUG_CONFLICTS_PER_HOUR} times an hour, then 429 before the body is read (not audited)`, async () => {
    const taken = (await ctx.app.inject({ method: 'GET', url: '/org', headers: target.headers })).json().slug as string;
    for (let i = 0; i < SLUG_CONFLICTS_PER_HOUR; i++) {
      const res = await patch(prober, { slug: taken });
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'slug' } });
    }
    const audited = await auditedPatches(prober.organization_id);
    const limited = await patch(prober, { slug: 'acme' });
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error).toMatchObject({ code: 'RATE_LIMITED', type: 'rate_limit_error' });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600 / SLUG_CONFLICTS_PER_HOUR);
    expect(await auditedPatches(prober.organization_id)).toBe(audited);

    // Only the prober is limited; the target changes its own slug as usual.
    expect((await patch(target, { slug: 'acme-two' })).statusCode).toBe(200);
    // One conflict's worth refills after an hour's share.
    clock.advance(retryAfter * 1000);
    expect((await patch(prober, { slug: 'acme-two' })).statusCode).toBe(409);
    expect((await patch(prober, { slug: 'prober-new' })).statusCode).toBe(429);
    clock.advance(3_600_000);
    const free = await patch(prober, { slug: 'prober-new' });
    expect(free.statusCode).toBe(200);
    expect(free.json().slug).toBe('prober-new');
  });
});
