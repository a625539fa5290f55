import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManualClock,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { ROLE_SCOPES, type Scope } from '@ent/common/auth/scopes';
import { INVITE_TTL_MS } from '../../src/features/invites/service.ts';
import { redeemInvite } from '../../src/features/members/service.ts';
import { WriteOutcome } from '../../src/features/shared/write/outcome.ts';
import {
  caller,
  identityTestContext,
  lastWrite,
  type CommittedWrite,
  type IdentityTestContext,
} from '../../../test-support/identity-context.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;
let writes: CommittedWrite[];
let api: IdentityTestContext['api'];
const clock = new ManualClock(Date.parse('2026-11-22T12:00:00.000Z'));

beforeAll(async () => {
  ({ ctx, org, other, writes, api } = await identityTestContext({ clock }));
});
afterAll(() => ctx.close());

const tokenOf = (url: string) => decodeURIComponent(url.split('/').at(-1)!);

describe('invites', () => {
  it('creates an invite with a link; details are invite_id and role, never the link', async () => {
    const res = await api.post('/org/invites', { role: 'developer', email: 'New@Example.com' });
    expect(res.statusCode).toBe(201);
    const invite = res.json();
    expect(invite).toMatchObject({ role: 'developer', email: 'new@example.com' });
    expect(invite.invite_id).toMatch(/^inv_/);
    expect(invite.url).toMatch(/\/join\/[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(invite.expires_at) - clock.now()).toBe(INVITE_TTL_MS);
    const write = lastWrite(writes);
    expect(write.details).toEqual({ invite_id: invite.invite_id, role: 'developer' });
    expect(JSON.stringify(write.details)).not.toContain(tokenOf(invite.url));
  });

  it('stores the token only hashed and encrypted', async () => {
    const invite = (await api.post('/org/invites', { role: 'viewer' })).json();
    const row = await ctx.db
      .selectFrom('invites')
      .selectAll()
      .where('id', '=', invite.invite_id)
      .executeTakeFirstOrThrow();
    const token = tokenOf(invite.url);
    expect(JSON.stringify(row)).not.toContain(token);
    expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('lists live invites with their links (an audited read)', async () => {
    const created = (await api.post('/org/invites', { role: 'admin' })).json();
    const res = await api.get('/org/invites');
    expect(res.statusCode).toBe(200);
    const found = res.json().invites.find((i: { invite_id: string }) => i.invite_id === created.invite_id);
    expect(found.url).toBe(created.url);
    expect((await caller(ctx, other.api_key).get('/org/invites')).json().invites).toEqual([]);
  });

  it('records a HEAD on the list like the GET it mirrors, and the audit filter finds it by method', async () => {
    const head = await ctx.app.inject({
      method: 'HEAD',
      url: '/org/invites',
      headers: { 'x-api-key': org.api_key },
    });
    expect(head.statusCode).toBe(200);
    const found = await api.get(`/org/audit-events?method=HEAD&request_id=${head.headers['x-request-id']}`);
    expect(found.statusCode).toBe(200);
    expect(found.json().audit_events).toMatchObject([{ method: 'HEAD', route: '/org/invites', status: 200 }]);
  });

  it('revokes with DELETE (204, details null); the invite leaves the list; unknown is 404', async () => {
    const created = (await api.post('/org/invites', { role: 'viewer' })).json();
    const res = await api.delete(`/org/invites/${created.invite_id}`);
    expect(res.statusCode).toBe(204);
    expect(lastWrite(writes)).toMatchObject({ method: 'DELETE', details: null });
    const list = (await api.get('/org/invites?limit=100')).json();
    expect(list.invites.map((i: { invite_id: string }) => i.invite_id)).not.toContain(created.invite_id);
    expect((await api.delete(`/org/invites/${created.invite_id}`)).statusCode).toBe(204);
    expect((await api.delete('/org/invites/inv_nope')).statusCode).toBe(404);
    expect((await caller(ctx, other.api_key).delete(`/org/invites/${created.invite_id}`)).statusCode).toBe(
      404,
    );
    await expect(
      redeemInvite(
        ctx.db,
        new WriteOutcome(),
        tokenOf(created.url),
        { email: 'x@example.com' },
        new Date(clock.now()),
      ),
    ).rejects.toMatchObject({ status: 409, code: 'CONFLICT', details: { reason: 'revoked' } });
  });

  it('a link is single-use: the second redemption fails, and the invite is no longer live', async () => {
    const created = (await api.post('/org/invites', { role: 'developer' })).json();
    const member = await redeemInvite(
      ctx.db,
      new WriteOutcome(),
      tokenOf(created.url),
      { email: 'joiner@example.com' },
      new Date(clock.now()),
    );
    expect(member).toMatchObject({
      organization_id: org.organization_id,
      role: 'developer',
      email: 'joiner@example.com',
    });
    await expect(
      redeemInvite(
        ctx.db,
        new WriteOutcome(),
        tokenOf(created.url),
        { email: 'again@example.com' },
        new Date(clock.now()),
      ),
    ).rejects.toThrow();
    const list = (await api.get('/org/invites?limit=100')).json();
    expect(list.invites.map((i: { invite_id: string }) => i.invite_id)).not.toContain(created.invite_id);
    expect((await api.delete(`/org/invites/${created.invite_id}`)).statusCode).toBe(409);
  });

  it('a link expires after 7 days', async () => {
    const created = (await api.post('/org/invites', { role: 'viewer' })).json();
    clock.advance(INVITE_TTL_MS + 1);
    const list = (await api.get('/org/invites?limit=100')).json();
    expect(list.invites.map((i: { invite_id: string }) => i.invite_id)).not.toContain(created.invite_id);
    await expect(
      redeemInvite(
        ctx.db,
        new WriteOutcome(),
        tokenOf(created.url),
        { email: 'late@example.com' },
        new Date(clock.now()),
      ),
    ).rejects.toThrow();
  });

  it("goes with its maker's rights: a demotion revokes the invites above the new role, a suspension all the rest", async () => {
    const maker = await createKeyWithScopes(ctx.db, org.organization_id, [], 'admin');
    const asMaker = caller(ctx, maker.apiKey);
    const made = async (role: string) => tokenOf((await asMaker.post('/org/invites', { role })).json().url);
    const [forAdmin, forDeveloper, forViewer, forViewerToo] = [
      await made('admin'),
      await made('developer'),
      await made('viewer'),
      await made('viewer'),
    ];
    const redeem = (token: string, email: string) =>
      redeemInvite(ctx.db, new WriteOutcome(), token, { email }, new Date(clock.now())).then(
        (member) => member.role,
        (error: { status?: number; details?: { reason?: string } }) =>
          `${error.status} ${error.details?.reason}`,
      );

    expect((await api.patch(`/org/members/${maker.memberId}`, { role: 'developer' })).statusCode).toBe(200);
    expect(await redeem(forAdmin, 'would-be-admin@example.com')).toBe('409 revoked');
    expect(await redeem(forDeveloper, 'developer@example.com')).toBe('developer');

    expect((await api.patch(`/org/members/${maker.memberId}`, { status: 'suspended' })).statusCode).toBe(200);
    expect(await redeem(forViewer, 'viewer@example.com')).toBe('409 revoked');
    // Reactivated, the maker does not bring the revoked invites back.
    expect((await api.patch(`/org/members/${maker.memberId}`, { status: 'active' })).statusCode).toBe(200);
    expect(await redeem(forViewerToo, 'viewer-too@example.com')).toBe('409 revoked');
  });

  it('validates bodies (422) and query strings', async () => {
    expect((await api.post('/org/invites', { role: 'owner' })).statusCode).toBe(422);
    expect((await api.post('/org/invites', { role: 'viewer', email: 'nope' })).statusCode).toBe(422);
    expect((await api.post('/org/invites', {})).statusCode).toBe(422);
    expect((await api.get('/org/invites?x=1')).statusCode).toBe(422);
  });

  it('is for admins only: a developer with full scopes gets 403 on every invite route', async () => {
    const dev = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer')).apiKey);
    expect((await dev.post('/org/invites', { role: 'admin' })).statusCode).toBe(403);
    expect((await dev.get('/org/invites')).statusCode).toBe(403);
    expect((await dev.delete('/org/invites/inv_x')).statusCode).toBe(403);
    const reader = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, ['org:read'])).apiKey);
    expect((await reader.get('/org/invites')).statusCode).toBe(200);
    expect((await reader.post('/org/invites', { role: 'viewer' })).statusCode).toBe(403);
  });

  it("shows a link only to a caller who could have made it: reading one must not grow the reader's rights", async () => {
    const adminInvite = (await api.post('/org/invites', { role: 'admin' })).json();
    const viewerInvite = (await api.post('/org/invites', { role: 'viewer' })).json();
    const linksSeenBy = async (key: string) => {
      const res = await caller(ctx, key).get('/org/invites');
      expect(res.statusCode).toBe(200);
      const urls = new Map<string, string | null>(
        res.json().invites.map((i: { invite_id: string; url: string | null }) => [i.invite_id, i.url]),
      );
      return [urls.get(adminInvite.invite_id), urls.get(viewerInvite.invite_id)];
    };
    const keyWith = async (scopes: Scope[]) =>
      (await createKeyWithScopes(ctx.db, org.organization_id, scopes)).apiKey;
    expect(await linksSeenBy(await keyWith(['org:read']))).toEqual([null, null]);
    // Every right of a viewer, but no org:write: it could not have made either invite.
    const viewerRights = [...ROLE_SCOPES.viewer];
    expect(await linksSeenBy(await keyWith(viewerRights))).toEqual([null, null]);
    const viewerMaker = await keyWith([...viewerRights, 'org:write']);
    expect(await linksSeenBy(viewerMaker)).toEqual([null, viewerInvite.url]);
    expect(await linksSeenBy(org.api_key)).toEqual([adminInvite.url, viewerInvite.url]);
  });
});
