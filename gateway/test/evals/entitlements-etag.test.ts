import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import type { GatewayApp } from '../../src/app.ts';
import { catalogClient, injector, gatewayOverAdmin } from '../helpers.ts';

const START = Date.UTC(2031, 4, 10, 12, 0, 0, 0);
const clock = new ManualClock(START);
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;
let api: ReturnType<typeof catalogClient>;

const list = (subscriber: string, query = '', headers: Record<string, string> = {}) =>
  gateway.inject({ method: 'GET', url: `/org/subscribers/${subscriber}/entitlements${query}`, headers: { ...org.headers, ...headers } });
/** Evals counted so far, read from a 2xx eval (which itself counts one). */
const usedAfterOneMore = async () => Number((await list('alice')).headers['x-svc-eval-used']);

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateway = await gatewayOverAdmin(ctx, { clock });
  org = await createTestOrganization(ctx.db, 'ETag org');
  await saveArrangement(ctx.db, org.organization_id, { plan: 'free', evalLimit: 1000, blocking: true, burstPerSecond: 10_000 });
  api = catalogClient(injector(gateway), org.headers);
  await api.feature('sso', 'flag');
  await api.feature('seats', 'limit');
  await api.plan('basic', [{ feature: 'seats', kind: 'limit', limit: 3 }]);
  await api.subscriber('alice');
  await api.subscribe('alice', 'basic');
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

describe('ETag on GET entitlements', () => {
  it('answers with a strong ETag that differs by query, and 304 on a matching If-None-Match', async () => {
    // Its own subscriber on basic (seats only): the other cases give alice overrides.
    await api.subscriber('etag-basic');
    await api.subscribe('etag-basic', 'basic');
    const granted = await list('etag-basic');
    const all = await list('etag-basic', '?all=true');
    const etag = granted.headers.etag as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    expect(all.headers.etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    expect(all.headers.etag).not.toBe(etag);
    expect((await list('etag-basic')).headers.etag).toBe(etag);

    const notModified = await list('etag-basic', '', { 'if-none-match': etag });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');
    expect(notModified.headers.etag).toBe(etag);
    expect(notModified.headers['x-svc-eval-limit']).toBe('1000');
    expect(notModified.headers['x-svc-eval-used']).toBeDefined();

    for (const header of ['"other", ' + etag, `W/${etag}`, '*']) {
      expect((await list('etag-basic', '', { 'if-none-match': header })).statusCode).toBe(304);
    }
    const other = await list('etag-basic', '', { 'if-none-match': '"other"' });
    expect(other.statusCode).toBe(200);
    expect(other.headers.etag).toBe(etag);
  });

  it('does not count a 304 as an eval (only 2xx count), and counts a 200 once', async () => {
    const etag = (await list('alice')).headers.etag as string;
    const before = await usedAfterOneMore();
    for (let i = 0; i < 3; i++) expect((await list('alice', '', { 'if-none-match': etag })).statusCode).toBe(304);
    expect(await usedAfterOneMore()).toBe(before + 1);
  });

  it('changes the ETag when the subscriber changes', async () => {
    const before = (await list('alice')).headers.etag as string;
    await api.override('alice', 'sso', { kind: 'flag', allowed: true });
    const after = await list('alice', '', { 'if-none-match': before });
    expect(after.statusCode).toBe(200);
    expect(after.headers.etag).not.toBe(before);
  });

  it('changes the ETag when an override expires, though no version moves', async () => {
    const expiresAt = new Date(clock.now() + 60_000).toISOString();
    await api.override('alice', 'seats', { kind: 'limit', limit: 99, expires_at: expiresAt });
    const live = await list('alice');
    expect(live.json().entitlements).toContainEqual({ feature: 'seats', kind: 'limit', limit: 99, source: 'override' });
    clock.advance(60_000);
    const expired = await list('alice', '', { 'if-none-match': live.headers.etag as string });
    expect(expired.statusCode).toBe(200);
    expect(expired.json().entitlements).toContainEqual({ feature: 'seats', kind: 'limit', limit: 3, source: 'plan' });
    expect(expired.headers.etag).not.toBe(live.headers.etag);
  });

  it('404s an unknown subscriber without an ETag', async () => {
    const res = await list('nobody', '', { 'if-none-match': '*' });
    expect(res.statusCode).toBe(404);
    expect(res.headers.etag).toBeUndefined();
  });
});
