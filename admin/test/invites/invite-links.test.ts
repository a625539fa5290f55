import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

/**
 * Where invite links point: CONSOLE_URL when it is set; without it, `/console` on the host the request reached,
 * as the gateway in front states it (X-Forwarded-Host and -Proto, believed from TRUSTED_PROXIES only).
 */
let unset: AdminTestContext;
let configured: AdminTestContext;
let unsetOrg: TestOrganization;
let configuredOrg: TestOrganization;

beforeAll(async () => {
  [unset, configured] = await Promise.all([
    createAdminContext({ config: { consoleUrl: null } }),
    createAdminContext({ config: { consoleUrl: 'https://console.example.com/console' } }),
  ]);
  [unsetOrg, configuredOrg] = await Promise.all([
    createTestOrganization(unset.db, 'Links'),
    createTestOrganization(configured.db, 'Links'),
  ]);
});
afterAll(async () => {
  await Promise.all([unset?.close(), configured?.close()]);
});

async function inviteLink(
  ctx: AdminTestContext,
  org: TestOrganization,
  headers: Record<string, string>,
  remoteAddress = '127.0.0.1',
): Promise<string> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/org/invites',
    headers: { 'x-api-key': org.api_key, ...headers },
    payload: { role: 'viewer' },
    remoteAddress,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ url: string }>().url;
}

async function listedLinks(ctx: AdminTestContext, org: TestOrganization, headers: Record<string, string>) {
  const res = await ctx.app.inject({
    method: 'GET',
    url: '/org/invites',
    headers: { 'x-api-key': org.api_key, ...headers },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ invites: { url: string }[] }>().invites.map((invite) => invite.url);
}

const JOIN = '/console/join/[A-Za-z0-9_-]{43}$';

describe('invite links without CONSOLE_URL', () => {
  it('point at the console on the host the gateway says its client addressed', async () => {
    const link = await inviteLink(unset, unsetOrg, {
      host: '127.0.0.1:4001',
      'x-forwarded-host': 'entitlements.example.org:8443',
      'x-forwarded-proto': 'https',
    });
    expect(link).toMatch(new RegExp(`^https://entitlements\\.example\\.org:8443${JOIN}`));
    // The list shows the same invites on the host it is read through.
    const listed = await listedLinks(unset, unsetOrg, { host: 'ent.internal:3000' });
    expect(listed.length).toBeGreaterThan(0);
    for (const url of listed) expect(url).toMatch(new RegExp(`^http://ent\\.internal:3000${JOIN}`));
  });

  it('use the Host of a direct request, and ignore forwarded headers from a peer that is no trusted proxy', async () => {
    expect(await inviteLink(unset, unsetOrg, { host: 'ent.internal:3000' })).toMatch(
      new RegExp(`^http://ent\\.internal:3000${JOIN}`),
    );
    const untrusted = await inviteLink(
      unset,
      unsetOrg,
      { host: 'ent.internal:3000', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
      '203.0.113.9',
    );
    expect(untrusted).toMatch(new RegExp(`^http://ent\\.internal:3000${JOIN}`));
  });
});

describe('invite links with CONSOLE_URL', () => {
  it('point at CONSOLE_URL whatever host the request reached', async () => {
    const link = await inviteLink(configured, configuredOrg, {
      host: 'ent.internal:3000',
      'x-forwarded-host': 'elsewhere.example.org',
    });
    expect(link).toMatch(new RegExp(`^https://console\\.example\\.com${JOIN}`));
  });
});
