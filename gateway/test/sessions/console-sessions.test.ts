import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { SESSION_COOKIE } from '@ent/common/auth/session-token';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import type { LightMyRequestResponse } from 'fastify';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, gatewayOverAdmin, seedProPlan } from '../helpers.ts';

const clock = new ManualClock(Date.UTC(2031, 6, 1, 12, 0, 0, 0));
const HOST = 'console.test';
const ORIGIN = `http://${HOST}`;
let ctx: AdminTestContext;
let gateway: GatewayApp;
let sessionLookups = 0;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateway = await gatewayOverAdmin(ctx, { clock });
  // Every session the gateway checks is one admin round trip: counted, to show keyed evals never make one.
  const lookUp = gateway.adminClient.session.bind(gateway.adminClient);
  gateway.adminClient.session = (tokenHash) => {
    sessionLookups += 1;
    return lookUp(tokenHash);
  };
});
afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

interface Browser {
  cookie: string;
  csrf: string;
  call(
    method: string,
    url: string,
    payload?: object,
    extra?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
}

/** A person signing up through the gateway, as a browser does: our host, Origin on writes, the cookie it got. */
async function signUpThroughGateway(): Promise<Browser> {
  const slug = `gw-${randomBytes(4).toString('hex')}`;
  const res = await gateway.inject({
    method: 'POST',
    url: '/console/api/sign-up',
    headers: { host: HOST, origin: ORIGIN },
    payload: {
      email: `${slug}@example.com`,
      password: 'correct horse battery',
      organization: { name: slug, slug },
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  const setCookie = String(res.headers['set-cookie']);
  expect(setCookie).toMatch(/HttpOnly; Secure; SameSite=Strict$/);
  const cookie = setCookie.split(';')[0]!;
  expect(cookie.startsWith(`${SESSION_COOKIE}=ses_`)).toBe(true);
  const csrf = res.json().csrf_token as string;
  return {
    cookie,
    csrf,
    call: (method, url, payload, extra = {}) =>
      gateway.inject({
        method: method as 'GET',
        url,
        headers: {
          host: HOST,
          cookie,
          ...(method === 'GET' ? {} : { origin: ORIGIN, 'x-csrf-token': csrf }),
          ...extra,
        },
        ...(payload === undefined ? {} : { payload }),
      }),
  };
}

/** The organization of a browser's session with `alice` on plan `pro`, and a full-access key minted by the session. */
async function organizationWithPlan(browser: Browser): Promise<{ apiKey: string }> {
  const send: Parameters<typeof catalogClient>[0] = async ({ method, url, payload }) =>
    browser.call(method, url, payload as object | undefined);
  await seedProPlan(catalogClient(send, {}));
  const organizationId = (await browser.call('GET', '/org')).json().organization_id as string;
  await saveArrangement(ctx.db, organizationId, {
    plan: 'free',
    evalLimit: 1000,
    blocking: true,
    burstPerSecond: 10_000,
  });
  const account = await browser.call('POST', '/org/service-accounts', { name: 'backend', role: 'admin' });
  const key = await browser.call(
    'POST',
    `/org/service-accounts/${account.json().service_account_id}/api-keys`,
    { scopes: [] },
  );
  expect(key.statusCode, key.body).toBe(201);
  return { apiKey: key.json().api_key as string };
}

describe('console sessions on the gateway', () => {
  it('answers evals and usage for a session, and stops the moment it signs out', async () => {
    const browser = await signUpThroughGateway();
    await organizationWithPlan(browser);

    const list = await browser.call('GET', '/org/subscribers/alice/entitlements');
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json().entitlements.map((e: { feature: string }) => e.feature)).toEqual([
      'seats',
      'sso',
      'storage',
    ]);
    const check = await browser.call('POST', '/org/subscribers/alice/entitlements/check', {
      feature: 'seats',
    });
    expect(check.statusCode, check.body).toBe(200);
    expect(check.json()).toEqual({ feature: 'seats', kind: 'limit', limit: 25, source: 'plan' });
    expect(check.headers['x-svc-eval-limit']).toBe('1000');
    const ofrep = await browser.call('POST', '/ofrep/v1/evaluate/flags/sso', {
      context: { targetingKey: 'alice' },
    });
    expect(ofrep.statusCode, ofrep.body).toBe(200);
    const usage = await browser.call('GET', '/org/usage/current');
    expect(usage.statusCode, usage.body).toBe(200);
    expect(usage.json().count).toBeGreaterThanOrEqual(2);

    const signOut = await browser.call('POST', '/console/api/sign-out');
    expect(signOut.statusCode).toBe(204);
    expect(String(signOut.headers['set-cookie'])).toContain('Max-Age=0');
    const after = await browser.call('GET', '/org/subscribers/alice/entitlements');
    expect(after.statusCode).toBe(401);
    expect(after.json().error.code).toBe('UNAUTHENTICATED');
    expect(
      (await browser.call('POST', '/org/subscribers/alice/entitlements/check', { feature: 'seats' }))
        .statusCode,
    ).toBe(401);
    expect((await browser.call('GET', '/org/usage/current')).statusCode).toBe(401);
  });

  it("refuses a session's POST eval without its CSRF token or from another origin (403)", async () => {
    const browser = await signUpThroughGateway();
    await organizationWithPlan(browser);
    const withoutToken = await browser.call(
      'POST',
      '/org/subscribers/alice/entitlements/check',
      { feature: 'sso' },
      { 'x-csrf-token': '' },
    );
    expect(withoutToken.statusCode).toBe(403);
    expect(withoutToken.json().error.code).toBe('FORBIDDEN');
    const foreign = await browser.call(
      'POST',
      '/org/subscribers/alice/entitlements/check',
      { feature: 'sso' },
      { origin: 'http://evil.test' },
    );
    expect(foreign.statusCode).toBe(403);
    const ofrep = await browser.call(
      'POST',
      '/ofrep/v1/evaluate/flags',
      { context: { targetingKey: 'alice' } },
      { 'x-csrf-token': 'wrong' },
    );
    expect(ofrep.statusCode).toBe(403);
  });

  it('leaves keyed evals as they were: no session lookup, even with a cookie riding along or after it ended', async () => {
    const browser = await signUpThroughGateway();
    const { apiKey } = await organizationWithPlan(browser);
    const keyed = (extra: Record<string, string> = {}) =>
      gateway.inject({
        method: 'POST',
        url: '/org/subscribers/alice/entitlements/check',
        headers: { 'x-api-key': apiKey, ...extra },
        payload: { feature: 'sso' },
      });
    expect((await keyed()).statusCode).toBe(200);
    const lookupsBefore = sessionLookups;
    expect((await keyed()).json()).toEqual({ feature: 'sso', kind: 'flag', allowed: true, source: 'plan' });
    expect((await keyed({ cookie: browser.cookie })).statusCode).toBe(200);
    expect((await browser.call('POST', '/console/api/sign-out')).statusCode).toBe(204);
    expect((await keyed({ cookie: browser.cookie })).statusCode).toBe(200);
    expect(sessionLookups).toBe(lookupsBefore);
    // A bad key is refused as a key, whatever cookie is sent with it.
    const badKey = await gateway.inject({
      method: 'GET',
      url: '/org/subscribers/alice/entitlements',
      headers: { 'x-api-key': 'svc-mk-1-nope', cookie: browser.cookie },
    });
    expect(badKey.statusCode).toBe(401);
    expect(sessionLookups).toBe(lookupsBefore);
  });

  it('refuses a session whose member was suspended, at once', async () => {
    const admin = await signUpThroughGateway();
    await organizationWithPlan(admin);
    const invite = await admin.call('POST', '/org/invites', { role: 'viewer' });
    const token = decodeURIComponent(invite.json().url.split('/').at(-1));
    const joined = await gateway.inject({
      method: 'POST',
      url: `/console/api/invites/${token}/accept`,
      headers: { host: HOST, origin: ORIGIN },
      payload: {
        password: 'correct horse battery',
        email: `viewer-${randomBytes(3).toString('hex')}@example.com`,
      },
    });
    expect(joined.statusCode, joined.body).toBe(201);
    const viewerCookie = String(joined.headers['set-cookie']).split(';')[0]!;
    const viewerList = () =>
      gateway.inject({
        method: 'GET',
        url: '/org/subscribers/alice/entitlements',
        headers: { host: HOST, cookie: viewerCookie },
      });
    expect((await viewerList()).statusCode).toBe(200);
    const suspended = await admin.call('PATCH', `/org/members/${joined.json().member.member_id}`, {
      status: 'suspended',
    });
    expect(suspended.statusCode, suspended.body).toBe(200);
    expect((await viewerList()).statusCode).toBe(401);
  });
});
