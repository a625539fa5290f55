import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { PASSWORD, consolePost, uniqueAccount } from '../console-sessions/browser.ts';

let ctx: AdminTestContext;
const clock = new ManualClock(Date.parse('2026-11-24T09:00:00.000Z'));

beforeAll(async () => {
  ctx = await createAdminContext({ clock, config: { consoleSignUpsPerHour: 2 } });
});
afterAll(() => ctx.close());

const signUpFrom = (ip: string, label = 'limit') => {
  const account = uniqueAccount(label);
  return consolePost(
    ctx,
    '/console/api/sign-up',
    {
      email: account.email,
      password: PASSWORD,
      organization: { name: `Org ${account.slug}`, slug: account.slug },
    },
    { 'x-forwarded-for': ip },
  );
};

describe('sign-ups per client address', () => {
  it('allows CONSOLE_SIGN_UPS_PER_HOUR per address, then 429 with Retry-After until the window ends', async () => {
    const ip = uniqueAccount().ip;
    const started = clock.now();
    try {
      expect((await signUpFrom(ip)).statusCode).toBe(201);
      clock.advance(10 * 60 * 1000);
      expect((await signUpFrom(ip)).statusCode).toBe(201);
      const limited = await signUpFrom(ip, 'limited');
      expect(limited.statusCode, limited.body).toBe(429);
      expect(limited.json().error.code).toBe('RATE_LIMITED');
      expect(Number(limited.headers['retry-after'])).toBe(50 * 60);
      expect(limited.headers['set-cookie']).toBeUndefined();
      expect((await signUpFrom(uniqueAccount().ip)).statusCode).toBe(201);
      clock.advance(50 * 60 * 1000);
      expect((await signUpFrom(ip)).statusCode).toBe(201);
    } finally {
      clock.set(started);
    }
  });

  it('admits no more sign-ups than the limit when they arrive all at once', async () => {
    const ip = uniqueAccount().ip;
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => signUpFrom(ip, `par${i}`)));
    const statuses = answers.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([201, 201, 429, 429, 429, 429, 429, 429]);
  });

  it('makes no organization for a refused sign-up', async () => {
    const ip = uniqueAccount().ip;
    expect((await signUpFrom(ip)).statusCode).toBe(201);
    expect((await signUpFrom(ip)).statusCode).toBe(201);
    const account = uniqueAccount('refused');
    const refused = await consolePost(
      ctx,
      '/console/api/sign-up',
      { email: account.email, password: PASSWORD, organization: { name: 'Refused', slug: account.slug } },
      { 'x-forwarded-for': ip },
    );
    expect(refused.statusCode).toBe(429);
    const row = await ctx.db
      .selectFrom('organizations')
      .select('id')
      .where('slug', '=', account.slug)
      .executeTakeFirst();
    expect(row).toBeUndefined();
  });

  it('counts attempts on a taken slug too: 60 of them from one address get 429 past the limit, not 60 "slug taken"', async () => {
    const owner = uniqueAccount('owned');
    expect(
      (
        await consolePost(
          ctx,
          '/console/api/sign-up',
          { email: owner.email, password: PASSWORD, organization: { name: 'Owned', slug: owner.slug } },
          { 'x-forwarded-for': owner.ip },
        )
      ).statusCode,
    ).toBe(201);
    const prober = uniqueAccount('prober');
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      const res = await consolePost(
        ctx,
        '/console/api/sign-up',
        { email: prober.email, password: PASSWORD, organization: { name: 'Probe', slug: owner.slug } },
        { 'x-forwarded-for': prober.ip },
      );
      statuses.push(res.statusCode);
    }
    expect(statuses.filter((status) => status === 409)).toHaveLength(2);
    expect(statuses.filter((status) => status === 429)).toHaveLength(58);
  });
});
