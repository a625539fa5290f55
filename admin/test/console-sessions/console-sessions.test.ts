import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSessionToken, SESSION_COOKIE } from '@ent/common/auth/session-token';
import {
  ManualClock,
  TEST_PASSWORD_HASH_COST,
  createTestOrganization,
  createAdminContext,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import {
  PASSWORD,
  asBrowser,
  auditEntries,
  browserHeaders,
  consolePost,
  joinWithRole,
  sessionCookieOf,
  signIn,
  signInAgain,
  signUp,
  tokenOfCookie,
  uniqueAccount,
} from './browser.ts';

let ctx: AdminTestContext;
const clock = new ManualClock(Date.parse('2026-11-24T09:00:00.000Z'));
const HOURS_12 = 12 * 60 * 60 * 1000;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
});
afterAll(() => ctx.close());

const organizationIdOf = async (
  call: (method: string, url: string) => Promise<{ json(): { organization_id: string } }>,
) => (await call('GET', '/org')).json().organization_id;

const expectErrorBody = (res: { json(): unknown }, status: number, code: string) => {
  expect(res.json()).toEqual({
    error: {
      type: expect.any(String),
      code,
      message: expect.any(String),
      request_id: expect.any(String),
      details: expect.any(Object),
    },
  });
  expect((res as unknown as { statusCode: number }).statusCode).toBe(status);
};

describe('sign-up and the session cookie', () => {
  it('creates an organization with the person as admin, and a HttpOnly, Secure, SameSite=Strict cookie for the whole site', async () => {
    const account = uniqueAccount('signup');
    const res = await consolePost(ctx, '/console/api/sign-up', {
      email: account.email.toUpperCase(),
      password: PASSWORD,
      name: 'Grace',
      organization: { name: 'Hopper Inc', slug: account.slug },
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      member: {
        member_id: expect.stringMatching(/^mem_/),
        email: account.email,
        name: 'Grace',
        role: 'admin',
      },
      organization: { name: 'Hopper Inc', slug: account.slug },
      csrf_token: expect.any(String),
      expires_at: new Date(clock.now() + HOURS_12).toISOString(),
    });
    const setCookie = String(res.headers['set-cookie']);
    expect(setCookie).toMatch(new RegExp(`^${SESSION_COOKIE}=ses_[0-9A-Za-z]{43};`));
    for (const attribute of ['HttpOnly', 'Secure', 'SameSite=Strict', 'Path=/', 'Max-Age=43200']) {
      expect(setCookie.split('; ')).toContain(attribute);
    }
    expect(res.headers['cache-control']).toBe('no-store');

    const cookie = sessionCookieOf(res);
    const session = await ctx.app.inject({
      method: 'GET',
      url: '/console/api/session',
      headers: browserHeaders('GET', { cookie }),
    });
    expect(session.statusCode).toBe(200);
    expect(session.json()).toEqual(body);

    // Only hashes are stored; the organization has the self-serve arrangement and no service account.
    const organizationId = await organizationIdOf(asBrowser(ctx, { cookie, csrf: body.csrf_token }));
    const row = await ctx.db
      .selectFrom('console_sessions')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(tokenOfCookie(cookie));
    expect(JSON.stringify(row)).not.toContain(body.csrf_token);
    expect(row.token_prefix).toBe(tokenOfCookie(cookie).slice(0, 12));
    const organization = await ctx.db
      .selectFrom('organizations')
      .selectAll()
      .where('id', '=', organizationId)
      .executeTakeFirstOrThrow();
    expect(organization).toMatchObject({ eval_plan: 'free', slug: account.slug });
    const password = await ctx.db
      .selectFrom('member_passwords')
      .selectAll()
      .where('member_id', '=', body.member.member_id)
      .executeTakeFirstOrThrow();
    expect(password.password_hash).toMatch(
      new RegExp(
        `^scrypt\\$${2 ** TEST_PASSWORD_HASH_COST}\\$8\\$1\\$[A-Za-z0-9+/=]{24}\\$[A-Za-z0-9+/=]{44}$`,
      ),
    );
  });

  it('refuses a taken slug with 409 CONFLICT and creates nothing', async () => {
    const first = await signUp(ctx, 'taken');
    const before = await ctx.db
      .selectFrom('organizations')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    const res = await consolePost(ctx, '/console/api/sign-up', {
      email: 'someone@example.com',
      password: PASSWORD,
      organization: { name: 'Copy', slug: first.slug },
    });
    expectErrorBody(res, 409, 'CONFLICT');
    expect(res.json().error.details).toEqual({ field: 'organization.slug', value: first.slug });
    expect(res.headers['set-cookie']).toBeUndefined();
    const after = await ctx.db
      .selectFrom('organizations')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(after.n).toBe(before.n);
  });

  it.each([
    ['a short password', { password: 'short' }, 'password'],
    ['a malformed email', { email: 'not-an-email' }, 'email'],
    ['a slug with capitals', { organization: { name: 'X', slug: 'Nope' } }, 'organization.slug'],
    ['an unknown field', { extra: true }, 'extra'],
  ])("refuses %s with SPEC.md's error body (422 VALIDATION_ERROR)", async (_name, change, field) => {
    const account = uniqueAccount('bad');
    const res = await consolePost(ctx, '/console/api/sign-up', {
      email: account.email,
      password: PASSWORD,
      organization: { name: 'X', slug: account.slug },
      ...change,
    });
    expectErrorBody(res, 422, 'VALIDATION_ERROR');
    expect(res.json().error.details.field).toBe(field);
  });

  it('refuses malformed JSON and a sign-in without its fields with the error body', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/console/api/sign-in',
      headers: browserHeaders('POST', { 'content-type': 'application/json' }),
      payload: '{"organization":',
    });
    expectErrorBody(res, 422, 'VALIDATION_ERROR');
    expectErrorBody(
      await consolePost(ctx, '/console/api/sign-in', { organization: 'x' }),
      422,
      'VALIDATION_ERROR',
    );
  });
});

describe('sessions on the /org routes', () => {
  it('reads with the cookie alone', async () => {
    const user = await signUp(ctx, 'reader');
    const res = await user.call('GET', '/org');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().slug).toBe(user.slug);
    expect((await user.call('GET', '/org/members')).json().members).toEqual([
      expect.objectContaining({ member_id: user.memberId, kind: 'user', role: 'admin', email: user.email }),
    ]);
  });

  it('refuses a write without the CSRF token (403, nothing written, nothing audited), and records one with it as member_session', async () => {
    const user = await signUp(ctx, 'csrf');
    const organizationId = await organizationIdOf(user.call);
    for (const csrf of [undefined, 'not-the-token', (await signUp(ctx, 'other')).csrf]) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/org/features',
        headers: browserHeaders('POST', {
          cookie: user.cookie,
          ...(csrf === undefined ? {} : { 'x-csrf-token': csrf }),
        }),
        payload: { key: 'sso', name: 'SSO', kind: 'flag' },
      });
      expectErrorBody(res, 403, 'FORBIDDEN');
    }
    expect((await user.call('GET', '/org/features')).json().features).toEqual([]);
    expect(await auditEntries(ctx, organizationId)).toEqual([]);

    const created = await user.call('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
    expect(created.statusCode, created.body).toBe(201);
    expect(await auditEntries(ctx, organizationId)).toEqual([
      {
        method: 'POST',
        route: '/org/features',
        actor_member_id: user.memberId,
        actor_auth_type: 'member_session',
        actor_key_prefix: tokenOfCookie(user.cookie).slice(0, 12),
        outcome: 'responded',
        status: 201,
      },
    ]);
  });

  it('refuses a write from another origin (403), even with the CSRF token', async () => {
    const user = await signUp(ctx, 'origin');
    for (const origin of ['http://evil.test', 'https://console.test', 'http://console.test:8080', 'null']) {
      const res = await user.call('POST', '/org/features', { key: 'x', name: 'X', kind: 'flag' }, { origin });
      expectErrorBody(res, 403, 'FORBIDDEN');
    }
    expect((await user.call('GET', '/org/features')).json().features).toEqual([]);
    // The origin a gateway forwards (X-Forwarded-Host, X-Forwarded-Proto) is the request's own.
    const forwarded = await user.call(
      'POST',
      '/org/features',
      { key: 'y', name: 'Y', kind: 'flag' },
      {
        host: '127.0.0.1:3001',
        'x-forwarded-host': 'console.example.com',
        'x-forwarded-proto': 'https',
        origin: 'https://console.example.com',
      },
    );
    expect(forwarded.statusCode, forwarded.body).toBe(201);
  });

  it('answers 401 for an unknown, malformed or absent session', async () => {
    for (const cookie of [
      `${SESSION_COOKIE}=${generateSessionToken().token}`,
      `${SESSION_COOKIE}=ses_short`,
      'other=1',
    ]) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: '/org',
        headers: browserHeaders('GET', { cookie }),
      });
      expectErrorBody(res, 401, 'UNAUTHENTICATED');
    }
    const session = await ctx.app.inject({
      method: 'GET',
      url: '/console/api/session',
      headers: browserHeaders('GET'),
    });
    expectErrorBody(session, 401, 'UNAUTHENTICATED');
  });

  it('lets X-API-Key win over a cookie: the key decides, the cookie is not looked at', async () => {
    const user = await signUp(ctx, 'keywins');
    const keyed = await createTestOrganization(ctx.db, 'Keyed');
    const res = await ctx.app.inject({
      method: 'GET',
      url: '/org',
      headers: { cookie: user.cookie, 'x-api-key': keyed.api_key },
    });
    expect(res.json().organization_id).toBe(keyed.organization_id);
    const badKey = await ctx.app.inject({
      method: 'GET',
      url: '/org',
      headers: { cookie: user.cookie, 'x-api-key': 'svc-mk-1-nope' },
    });
    expectErrorBody(badKey, 401, 'UNAUTHENTICATED');
    // A keyed write needs no CSRF token, whatever cookie rides along.
    const write = await ctx.app.inject({
      method: 'POST',
      url: '/org/features',
      headers: { cookie: user.cookie, 'x-api-key': keyed.api_key, origin: 'http://elsewhere.test' },
      payload: { key: 'sso', name: 'SSO', kind: 'flag' },
    });
    expect(write.statusCode).toBe(201);
  });
});

describe('how sessions end', () => {
  it('sign-out ends the session at once and clears the cookie; signing out again is harmless', async () => {
    const user = await signUp(ctx, 'signout');
    const withoutCsrf = await ctx.app.inject({
      method: 'POST',
      url: '/console/api/sign-out',
      headers: browserHeaders('POST', { cookie: user.cookie }),
    });
    expectErrorBody(withoutCsrf, 403, 'FORBIDDEN');
    expect((await user.call('GET', '/org')).statusCode).toBe(200);

    const res = await user.call('POST', '/console/api/sign-out');
    expect(res.statusCode).toBe(204);
    const cleared = String(res.headers['set-cookie']);
    expect(cleared).toMatch(new RegExp(`^${SESSION_COOKIE}=;`));
    expect(cleared).toContain('Max-Age=0');
    expectErrorBody(await user.call('GET', '/org'), 401, 'UNAUTHENTICATED');
    expectErrorBody(await user.call('GET', '/console/api/session'), 401, 'UNAUTHENTICATED');
    expect((await user.call('POST', '/console/api/sign-out')).statusCode).toBe(204);
  });

  it("a password change ends the member's other sessions, not the one that made it", async () => {
    const user = await signUp(ctx, 'password');
    const otherBrowser = await signInAgain(ctx, user);
    const wrong = await user.call('POST', '/console/api/password', {
      current_password: 'not the password',
      new_password: 'a brand new password',
    });
    expectErrorBody(wrong, 422, 'VALIDATION_ERROR');
    expect(wrong.json().error.details.field).toBe('current_password');
    expect((await otherBrowser.call('GET', '/org')).statusCode).toBe(200);

    const res = await user.call('POST', '/console/api/password', {
      current_password: PASSWORD,
      new_password: 'a brand new password',
    });
    expect(res.statusCode, res.body).toBe(204);
    expect((await user.call('GET', '/org')).statusCode).toBe(200);
    expectErrorBody(await otherBrowser.call('GET', '/org'), 401, 'UNAUTHENTICATED');
    expect((await signIn(ctx, user)).statusCode).toBe(401);
    expect((await signIn(ctx, { ...user, password: 'a brand new password' })).statusCode).toBe(200);
  });

  it('suspending a member ends their sessions (and reactivating does not bring them back)', async () => {
    const admin = await signUp(ctx, 'suspend');
    const developer = await joinWithRole(ctx, admin, 'developer');
    expect((await developer.call('GET', '/org/features')).statusCode).toBe(200);
    const suspended = await admin.call('PATCH', `/org/members/${developer.memberId}`, {
      status: 'suspended',
    });
    expect(suspended.statusCode, suspended.body).toBe(200);
    expectErrorBody(await developer.call('GET', '/org/features'), 401, 'UNAUTHENTICATED');
    const rows = await ctx.db
      .selectFrom('console_sessions')
      .select('revoked_at')
      .where('member_id', '=', developer.memberId)
      .execute();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((row) => row.revoked_at !== null)).toBe(true);
    expect(
      (await admin.call('PATCH', `/org/members/${developer.memberId}`, { status: 'active' })).statusCode,
    ).toBe(200);
    expectErrorBody(await developer.call('GET', '/org/features'), 401, 'UNAUTHENTICATED');
    expect((await signIn(ctx, developer)).statusCode).toBe(200);
  });

  it('a session ends at its expiry, CONSOLE_SESSION_HOURS after sign-in', async () => {
    const user = await signUp(ctx, 'expiry');
    const started = clock.now();
    try {
      clock.advance(HOURS_12 - 1000);
      expect((await user.call('GET', '/org')).statusCode).toBe(200);
      clock.advance(1000);
      expectErrorBody(await user.call('GET', '/org'), 401, 'UNAUTHENTICATED');
      expectErrorBody(await user.call('GET', '/console/api/session'), 401, 'UNAUTHENTICATED');
    } finally {
      clock.set(started);
    }
  });
});

describe('role limits on sessions', () => {
  it("a viewer's session cannot write: 403, recorded rejected", async () => {
    const admin = await signUp(ctx, 'viewer');
    const viewer = await joinWithRole(ctx, admin, 'viewer');
    const organizationId = await organizationIdOf(admin.call);
    expect((await viewer.call('GET', '/org/features')).statusCode).toBe(200);
    const res = await viewer.call('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
    expectErrorBody(res, 403, 'FORBIDDEN');
    const [entry] = await auditEntries(ctx, organizationId);
    expect(entry).toMatchObject({
      route: '/org/features',
      actor_member_id: viewer.memberId,
      actor_auth_type: 'member_session',
      actor_key_prefix: tokenOfCookie(viewer.cookie).slice(0, 12),
      outcome: 'rejected',
    });
  });

  it("a developer's session cannot read the audit log, nor change members", async () => {
    const admin = await signUp(ctx, 'dev');
    const developer = await joinWithRole(ctx, admin, 'developer');
    expectErrorBody(await developer.call('GET', '/org/audit-events'), 403, 'FORBIDDEN');
    expectErrorBody(
      await developer.call('PATCH', `/org/members/${admin.memberId}`, { role: 'viewer' }),
      403,
      'FORBIDDEN',
    );
    expect(
      (await developer.call('POST', '/org/features', { key: 'dev', name: 'Dev', kind: 'flag' })).statusCode,
    ).toBe(201);
    expect((await admin.call('GET', '/org/audit-events')).statusCode).toBe(200);
  });

  it('a session may mint a full-access key on a service account of its role or lower (rights never grow)', async () => {
    const admin = await signUp(ctx, 'minter');
    const account = await admin.call('POST', '/org/service-accounts', { name: 'backend', role: 'developer' });
    expect(account.statusCode, account.body).toBe(201);
    const key = await admin.call(
      'POST',
      `/org/service-accounts/${account.json().service_account_id}/api-keys`,
      { scopes: [] },
    );
    expect(key.statusCode, key.body).toBe(201);
    const developer = await joinWithRole(ctx, admin, 'developer');
    const adminAccount = await admin.call('POST', '/org/service-accounts', { name: 'ops', role: 'admin' });
    const refused = await developer.call(
      'POST',
      `/org/service-accounts/${adminAccount.json().service_account_id}/api-keys`,
      { scopes: [] },
    );
    expectErrorBody(refused, 403, 'FORBIDDEN');
  });
});

describe('failed sign-ins', () => {
  it('answers one 401 for every wrong part', async () => {
    const user = await signUp(ctx, 'wrong');
    const messages = new Set<string>();
    for (const attempt of [
      { ...user, password: 'not the password' },
      { ...user, email: 'nobody@example.com' },
      { ...user, slug: 'no-such-organization' },
    ]) {
      const res = await signIn(ctx, attempt);
      expectErrorBody(res, 401, 'UNAUTHENTICATED');
      messages.add(res.json().error.message);
    }
    expect(messages.size).toBe(1);
    const res = await signIn(ctx, {
      ...user,
      slug: user.slug.toUpperCase(),
      email: user.email.toUpperCase(),
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('limits an account to 5 failures per 15 minutes from one address: 429 with Retry-After there, even for the right password', async () => {
    const user = await signUp(ctx, 'limited');
    const started = clock.now();
    try {
      for (let i = 0; i < 5; i++)
        expect((await signIn(ctx, { ...user, password: `wrong ${i}` })).statusCode).toBe(401);
      const limited = await signIn(ctx, user);
      expectErrorBody(limited, 429, 'RATE_LIMITED');
      expect(Number(limited.headers['retry-after'])).toBe(15 * 60);
      expect(limited.headers['set-cookie']).toBeUndefined();
      clock.advance(10 * 60 * 1000);
      expect(Number((await signIn(ctx, user)).headers['retry-after'])).toBe(5 * 60);
      clock.advance(5 * 60 * 1000);
      expect((await signIn(ctx, user)).statusCode).toBe(200);
    } finally {
      clock.set(started);
    }
  });

  it('lets no one lock an account out with a few addresses: after 5 failures from each of 5 addresses the right password still signs in elsewhere', async () => {
    const user = await signUp(ctx, 'lockout');
    for (let address = 0; address < 5; address++) {
      const ip = uniqueAccount().ip;
      for (let i = 0; i < 5; i++)
        expect((await signIn(ctx, { ...user, password: `wrong ${i}`, ip })).statusCode).toBe(401);
      expectErrorBody(await signIn(ctx, { ...user, password: 'wrong again', ip }), 429, 'RATE_LIMITED');
    }
    const res = await signIn(ctx, user);
    expect(res.statusCode, res.body).toBe(200);
  });

  it('bounds an account at 100 failures per 15 minutes from all addresses together: then 429 from any address', async () => {
    const user = await signUp(ctx, 'ceiling');
    const started = clock.now();
    try {
      for (let address = 0; address < 20; address++) {
        const ip = `10.77.${address}.1`;
        for (let i = 0; i < 5; i++)
          expect((await signIn(ctx, { ...user, password: `wrong ${i}`, ip })).statusCode).toBe(401);
      }
      const limited = await signIn(ctx, user);
      expectErrorBody(limited, 429, 'RATE_LIMITED');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      clock.advance(15 * 60 * 1000);
      expect((await signIn(ctx, user)).statusCode).toBe(200);
    } finally {
      clock.set(started);
    }
  });

  it('limits an address to 30 failures per 15 minutes, whichever accounts it tries', async () => {
    const user = await signUp(ctx, 'address');
    const ip = uniqueAccount().ip;
    for (let i = 0; i < 30; i++) {
      expect(
        (await signIn(ctx, { slug: user.slug, email: `guess-${i}@example.com`, password: 'guess', ip }))
          .statusCode,
      ).toBe(401);
    }
    const limited = await signIn(ctx, { ...user, ip });
    expectErrorBody(limited, 429, 'RATE_LIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await signIn(ctx, user)).statusCode).toBe(200);
  });
});

describe('failed sign-ins sent all at once', () => {
  it('lets no more guesses be checked than the account allows, even in parallel: the right one among them is 429', async () => {
    const user = await signUp(ctx, 'parallel');
    const guesses = Array.from({ length: 20 }, (_, i) => (i === 12 ? user.password : `guess ${i}`));
    const answers = await Promise.all(guesses.map((password) => signIn(ctx, { ...user, password })));
    const statuses = answers.map((res) => res.statusCode);
    expect(
      statuses.filter((status) => status === 401).length + statuses.filter((s) => s === 200).length,
    ).toBe(5);
    expect(statuses.filter((status) => status === 429)).toHaveLength(15);
  });

  it('lets no more guesses through from one address than its limit, in parallel', async () => {
    const user = await signUp(ctx, 'paraddr');
    const ip = uniqueAccount().ip;
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        signIn(ctx, { slug: user.slug, email: `guess-${i}@example.com`, password: 'guess', ip }),
      ),
    );
    const statuses = answers.map((res) => res.statusCode);
    expect(statuses.filter((status) => status === 401)).toHaveLength(30);
    expect(statuses.filter((status) => status === 429)).toHaveLength(10);
  });

  it('gives the place back on a correct password: the address is charged for failures only', async () => {
    const user = await signUp(ctx, 'giveback');
    const ip = uniqueAccount().ip;
    for (let i = 0; i < 40; i++) expect((await signIn(ctx, { ...user, ip })).statusCode).toBe(200);
    for (let i = 0; i < 30; i++) {
      expect((await signIn(ctx, { ...user, email: `x-${i}@example.com`, ip })).statusCode).toBe(401);
    }
    expectErrorBody(await signIn(ctx, { ...user, ip }), 429, 'RATE_LIMITED');
  });

  it('checks no more current passwords at once than the account allows', async () => {
    const user = await signUp(ctx, 'parpw');
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        user.call('POST', '/console/api/password', {
          current_password: `wrong ${i}`,
          new_password: 'another long password',
        }),
      ),
    );
    const statuses = answers.map((res) => res.statusCode);
    expect(statuses.filter((status) => status === 422)).toHaveLength(5);
    expect(statuses.filter((status) => status === 429)).toHaveLength(7);
  });
});

describe('console writes come from our own origin', () => {
  it('refuses a sign-in posted by another site', async () => {
    const user = await signUp(ctx, 'loginx');
    const res = await consolePost(
      ctx,
      '/console/api/sign-in',
      { organization: user.slug, email: user.email, password: PASSWORD },
      { origin: 'http://evil.test' },
    );
    expectErrorBody(res, 403, 'FORBIDDEN');
    expect(res.headers['set-cookie']).toBeUndefined();
  });
});
