import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSessionToken } from '@ent/common/auth/session-token';
import { ManualClock, createAdminContext, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { INVITE_TTL_MS } from '../../src/features/invites/service.ts';
import {
  CONSOLE_ORIGIN,
  PASSWORD,
  browserHeaders,
  consolePost,
  sessionCookieOf,
  signUp,
  tokenOfCookie,
  uniqueAccount,
  type ConsoleUser,
} from '../console-sessions/browser.ts';

let ctx: AdminTestContext;
const clock = new ManualClock(Date.parse('2026-11-24T09:00:00.000Z'));
const INTERNAL_TOKEN = 'console-invites-internal-token';

beforeAll(async () => {
  ctx = await createAdminContext({ clock, config: { internalToken: INTERNAL_TOKEN } });
});
afterAll(() => ctx.close());

/** A new invite of `admin`'s organization: its token, as the link carries it, and its id. */
async function invite(admin: ConsoleUser, body: { role: string; email?: string }) {
  const res = await admin.call('POST', '/org/invites', body);
  if (res.statusCode !== 201) throw new Error(`invite: ${res.statusCode} ${res.body}`);
  const { url, invite_id: inviteId } = res.json();
  // No CONSOLE_URL: the link is on the console's own origin, as the browser addressed it.
  expect(url).toMatch(new RegExp(`^${CONSOLE_ORIGIN}/console/join/[A-Za-z0-9_-]{43}$`));
  return { token: decodeURIComponent(url.split('/').at(-1)), inviteId: inviteId as string };
}

const preview = (token: string) =>
  ctx.app.inject({ method: 'GET', url: `/console/api/invites/${token}`, headers: browserHeaders('GET') });
const accept = (token: string, body: object) =>
  consolePost(ctx, `/console/api/invites/${token}/accept`, body);

describe('invite preview', () => {
  it('shows the organization, role, email, expiry and status of a pending invite', async () => {
    const admin = await signUp(ctx, 'preview');
    const { token } = await invite(admin, { role: 'developer', email: 'Dev@Example.com' });
    const res = await preview(token);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      organization: { name: `Org ${admin.slug}`, slug: admin.slug },
      role: 'developer',
      email: 'dev@example.com',
      expires_at: new Date(clock.now() + INVITE_TTL_MS).toISOString(),
      status: 'pending',
    });
  });

  it('says accepted, revoked or expired, and 404 for a token never issued', async () => {
    const admin = await signUp(ctx, 'statuses');
    const used = await invite(admin, { role: 'viewer' });
    expect((await accept(used.token, { password: PASSWORD, email: uniqueAccount().email })).statusCode).toBe(
      201,
    );
    expect((await preview(used.token)).json().status).toBe('accepted');

    const revoked = await invite(admin, { role: 'viewer' });
    expect((await admin.call('DELETE', `/org/invites/${revoked.inviteId}`)).statusCode).toBe(204);
    expect((await preview(revoked.token)).json().status).toBe('revoked');

    const expiring = await invite(admin, { role: 'viewer' });
    const started = clock.now();
    try {
      clock.advance(INVITE_TTL_MS);
      expect((await preview(expiring.token)).json().status).toBe('expired');
    } finally {
      clock.set(started);
    }

    const unknown = await preview('never-issued-token');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('NOT_FOUND');
  });
});

describe('joining with an invite', () => {
  it("makes a member with the invite's role and starts their session (cookie); the link works once", async () => {
    const admin = await signUp(ctx, 'join');
    const { token } = await invite(admin, { role: 'viewer', email: 'joiner@example.com' });
    const res = await accept(token, { password: PASSWORD, name: 'Joiner' });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({
      member: { email: 'joiner@example.com', name: 'Joiner', role: 'viewer' },
      organization: { slug: admin.slug },
      csrf_token: expect.any(String),
    });
    const cookie = sessionCookieOf(res);
    const members = (await admin.call('GET', '/org/members')).json().members;
    expect(members).toContainEqual(
      expect.objectContaining({
        member_id: body.member.member_id,
        role: 'viewer',
        status: 'active',
        kind: 'user',
      }),
    );
    const org = await ctx.app.inject({
      method: 'GET',
      url: '/org',
      headers: browserHeaders('GET', { cookie }),
    });
    expect(org.json().slug).toBe(admin.slug);
    // And the person signs in with the password they chose.
    const signedIn = await consolePost(ctx, '/console/api/sign-in', {
      organization: admin.slug,
      email: 'joiner@example.com',
      password: PASSWORD,
    });
    expect(signedIn.statusCode).toBe(200);

    const again = await accept(token, { password: PASSWORD, email: 'someone-else@example.com' });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatchObject({ code: 'CONFLICT', details: { reason: 'accepted' } });
  });

  it('refuses an expired or revoked link with 409 and its reason, and an unknown one with 404', async () => {
    const admin = await signUp(ctx, 'refused');
    const revoked = await invite(admin, { role: 'viewer' });
    await admin.call('DELETE', `/org/invites/${revoked.inviteId}`);
    const refused = await accept(revoked.token, { password: PASSWORD, email: uniqueAccount().email });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.details).toMatchObject({ reason: 'revoked' });

    const expiring = await invite(admin, { role: 'viewer' });
    const started = clock.now();
    try {
      clock.advance(INVITE_TTL_MS + 1);
      const expired = await accept(expiring.token, { password: PASSWORD, email: uniqueAccount().email });
      expect(expired.statusCode).toBe(409);
      expect(expired.json().error.details).toMatchObject({ reason: 'expired' });
    } finally {
      clock.set(started);
    }
    expect(
      (await accept('never-issued-token', { password: PASSWORD, email: uniqueAccount().email })).statusCode,
    ).toBe(404);
  });

  it('needs an email when the invite names none, and takes none other than the one it names (422)', async () => {
    const admin = await signUp(ctx, 'emails');
    const open = await invite(admin, { role: 'developer' });
    const missing = await accept(open.token, { password: PASSWORD });
    expect(missing.statusCode).toBe(422);
    expect(missing.json().error.details.field).toBe('email');
    const named = await invite(admin, { role: 'developer', email: 'named@example.com' });
    const other = await accept(named.token, { password: PASSWORD, email: 'other@example.com' });
    expect(other.statusCode).toBe(422);
    // Neither attempt used the link.
    expect((await preview(open.token)).json().status).toBe('pending');
    expect((await preview(named.token)).json().status).toBe('pending');
    expect((await accept(named.token, { password: PASSWORD, email: 'NAMED@example.com' })).statusCode).toBe(
      201,
    );
  });

  it('answers 409 CONFLICT (not 500) when the email is already a member, and leaves the link unused', async () => {
    const admin = await signUp(ctx, 'dupe');
    const { token } = await invite(admin, { role: 'viewer', email: admin.email });
    const res = await accept(token, { password: PASSWORD });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error).toMatchObject({
      code: 'CONFLICT',
      details: { field: 'email', value: admin.email },
    });
    expect((await preview(token)).json().status).toBe('pending');
  });

  it('refuses a short password (422) before the link is used', async () => {
    const admin = await signUp(ctx, 'shortpw');
    const { token } = await invite(admin, { role: 'viewer', email: 'short@example.com' });
    const res = await accept(token, { password: 'short' });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details.field).toBe('password');
    expect((await preview(token)).json().status).toBe('pending');
  });
});

describe('POST /internal/session (what gateways ask)', () => {
  const lookup = (
    tokenHash: string,
    headers: Record<string, string> = { 'x-internal-token': INTERNAL_TOKEN },
  ) =>
    ctx.app.inject({ method: 'POST', url: '/internal/session', headers, payload: { token_hash: tokenHash } });

  it("answers the live session's principal and CSRF hash, null once it ended, and hides from callers without the token", async () => {
    const user = await signUp(ctx, 'internal');
    const tokenHash = hashSessionToken(tokenOfCookie(user.cookie));
    const res = await lookup(tokenHash);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      session: {
        organizationId: expect.stringMatching(/^org_/),
        memberId: user.memberId,
        sessionId: expect.stringMatching(/^ses_/),
        keyPrefix: tokenOfCookie(user.cookie).slice(0, 12),
        role: 'admin',
        csrfHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    });
    expect((await lookup(tokenHash, {})).statusCode).toBe(404);
    expect((await user.call('POST', '/console/api/sign-out')).statusCode).toBe(204);
    expect((await lookup(tokenHash)).json()).toEqual({ session: null });
    expect((await lookup('0'.repeat(64))).json()).toEqual({ session: null });
    expect((await lookup('not-a-hash')).statusCode).toBe(422);
  });
});
