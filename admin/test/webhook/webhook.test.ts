import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/app.ts';
import { createTestOrganization, type AdminTestContext } from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { decryptSecret } from '../../src/crypto/secrets.ts';
import {
  caller,
  identityTestContext,
  lastWrite,
  type CommittedWrite,
  type IdentityTestContext,
} from '../../../test-support/identity-context.ts';
import { asBrowser, signUp } from '../console-sessions/browser.ts';

let ctx: AdminTestContext;
let writes: CommittedWrite[];
let api: IdentityTestContext['api'];

beforeAll(async () => {
  ({ ctx, writes, api } = await identityTestContext());
});
afterAll(() => ctx.close());

/** An organization of its own (so cases share nothing), its admin caller, and, with `url`, a webhook. */
async function freshOrganization(url?: string) {
  const own = await createTestOrganization(ctx.db, 'Webhook org');
  const ownApi = caller(ctx, own.api_key);
  const created = url === undefined ? null : (await ownApi.put('/org/webhook', { url })).json();
  return { own, ownApi, created };
}

describe('webhook configuration', () => {
  it('answers 404 before a webhook exists, on reads and on rotate/enable/disable', async () => {
    const { ownApi } = await freshOrganization();
    expect((await ownApi.get('/org/webhook')).statusCode).toBe(404);
    for (const action of ['rotate', 'enable', 'disable']) {
      expect((await ownApi.post(`/org/webhook/${action}`)).statusCode).toBe(404);
    }
  });

  it('PUT creates it (201) and shows the secret once; details are url and secret_prefix, never the secret', async () => {
    const { ownApi: api } = await freshOrganization();
    const res = await api.put('/org/webhook', { url: 'http://127.0.0.1:9/hooks' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(body.secret.slice(6), 'base64')).toHaveLength(32);
    expect(body).toMatchObject({
      url: 'http://127.0.0.1:9/hooks',
      disabled: false,
      secret_prefix: body.secret.slice(0, 14),
    });
    const write = lastWrite(writes);
    expect(write.details).toEqual({ url: 'http://127.0.0.1:9/hooks', secret_prefix: body.secret_prefix });
    expect(JSON.stringify(write.details)).not.toContain(body.secret);
    const read = (await api.get('/org/webhook')).json();
    expect(read.secret).toBeUndefined();
    expect(read.secret_prefix).toBe(body.secret_prefix);
  });

  it('stores the secret encrypted (a dump alone does not reveal it)', async () => {
    const { own: org } = await freshOrganization('http://127.0.0.1:9/hooks');
    const row = await ctx.db
      .selectFrom('webhooks')
      .selectAll()
      .where('organization_id', '=', org.organization_id)
      .executeTakeFirstOrThrow();
    const secret = decryptSecret(
      row.secret_ciphertext,
      ctx.config.secretsKey,
      `webhook:${org.organization_id}`,
    );
    expect(secret).toMatch(/^whsec_/);
    expect(JSON.stringify(row)).not.toContain(secret.slice(6));
    expect(() => decryptSecret(row.secret_ciphertext, ctx.config.secretsKey, 'webhook:org_other')).toThrow();
  });

  it('PUT on an existing webhook changes url and disabled (as changes, 200, no secret); null when unchanged', async () => {
    const { ownApi: api } = await freshOrganization('http://127.0.0.1:9/hooks');
    const res = await api.put('/org/webhook', { url: 'http://127.0.0.1:9/v2', disabled: true });
    expect(res.statusCode).toBe(200);
    expect(res.json().secret).toBeUndefined();
    expect(lastWrite(writes).details).toEqual({
      url: { from: 'http://127.0.0.1:9/hooks', to: 'http://127.0.0.1:9/v2' },
      disabled: { from: false, to: true },
    });
    await api.put('/org/webhook', { url: 'http://127.0.0.1:9/v2' });
    expect(lastWrite(writes).details).toBeNull();
  });

  it('enable and disable report disabled as a change, null when already so', async () => {
    const { ownApi: api } = await freshOrganization('http://127.0.0.1:9/hooks');
    expect((await api.post('/org/webhook/disable')).statusCode).toBe(200);
    const enabled = await api.post('/org/webhook/enable');
    expect(enabled.statusCode).toBe(200);
    expect(enabled.json().disabled).toBe(false);
    expect(lastWrite(writes).details).toEqual({ disabled: { from: true, to: false } });
    await api.post('/org/webhook/enable');
    expect(lastWrite(writes).details).toBeNull();
    expect((await api.post('/org/webhook/disable')).json().disabled).toBe(true);
    expect(lastWrite(writes).details).toEqual({ disabled: { from: false, to: true } });
    await api.post('/org/webhook/enable');
  });

  it('rotate returns the new secret once; secret_prefix as a change; previous secret kept 24 hours', async () => {
    const { ownApi: api } = await freshOrganization('http://127.0.0.1:9/hooks');
    const before = (await api.get('/org/webhook')).json();
    const res = await api.post('/org/webhook/rotate');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.secret).toMatch(/^whsec_/);
    expect(body.secret_prefix).not.toBe(before.secret_prefix);
    const hours = (Date.parse(body.previous_secret_expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
    const write = lastWrite(writes);
    expect(write.details).toEqual({ secret_prefix: { from: before.secret_prefix, to: body.secret_prefix } });
    expect(JSON.stringify(write.details)).not.toContain(body.secret);
  });

  it('reports previous_secret_expires_at only while the previous secret still signs, then null', async () => {
    const { ownApi: api, own: org } = await freshOrganization('http://127.0.0.1:9/hooks');
    expect((await api.get('/org/webhook')).json().previous_secret_expires_at).toBeNull();
    expect((await api.post('/org/webhook/rotate')).json().previous_secret_expires_at).not.toBeNull();
    await ctx.db
      .updateTable('webhooks')
      .set({ previous_secret_expires_at: new Date(Date.now() - 1000) })
      .where('organization_id', '=', org.organization_id)
      .execute();
    expect((await api.get('/org/webhook')).json().previous_secret_expires_at).toBeNull();
    expect((await api.post('/org/webhook/disable')).json().previous_secret_expires_at).toBeNull();
  });

  it.each([
    [{ url: 'not a url' }, 'url'],
    [{ url: 'ftp://example.com/x' }, 'url'],
    [{ url: 'https://user:pw@example.com/x' }, 'url'],
    [{}, 'url'],
    [{ url: 'https://example.com', secret: 'whsec_x' }, 'secret'],
  ])('PUT refuses %j with 422 on %s', async (payload, field) => {
    const res = await api.put('/org/webhook', payload);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field } });
  });

  it('refuses private and loopback URLs when private targets are not allowed', async () => {
    const strict = await buildAdminApp({
      config: { ...ctx.config, webhookAllowPrivateTargets: false },
      db: ctx.db,
      redis: ctx.redis,
      logger: false,
    });
    await strict.ready();
    try {
      const fresh = await createTestOrganization(ctx.db, 'Strict');
      for (const url of [
        'http://127.0.0.1:8080/x',
        'http://localhost/x',
        'http://10.1.2.3/x',
        'http://[::1]/x',
        'http://169.254.169.254/latest',
      ]) {
        const res = await strict.inject({
          method: 'PUT',
          url: '/org/webhook',
          headers: fresh.headers,
          payload: { url },
        });
        expect(res.statusCode, url).toBe(422);
      }
      const ok = await strict.inject({
        method: 'PUT',
        url: '/org/webhook',
        headers: fresh.headers,
        payload: { url: 'https://93.184.215.14/hooks' },
      });
      expect(ok.statusCode).toBe(201);
    } finally {
      await strict.close();
    }
  });

  it('needs org:read to read and org:write to change; a viewer cannot change it', async () => {
    const { own: org } = await freshOrganization('http://127.0.0.1:9/hooks');
    const reader = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, ['org:read'])).apiKey);
    expect((await reader.get('/org/webhook')).statusCode).toBe(200);
    expect((await reader.get('/org/webhook/deliveries')).statusCode).toBe(200);
    expect((await reader.put('/org/webhook', { url: 'http://127.0.0.1:9/x' })).statusCode).toBe(403);
    expect((await reader.post('/org/webhook/rotate')).statusCode).toBe(403);
    const writer = caller(
      ctx,
      (await createKeyWithScopes(ctx.db, org.organization_id, ['org:write'])).apiKey,
    );
    expect((await writer.get('/org/webhook')).statusCode).toBe(403);
    expect((await writer.post('/org/webhook/disable')).statusCode).toBe(200);
    const viewer = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer')).apiKey);
    expect((await viewer.post('/org/webhook/enable')).statusCode).toBe(403);
    const checker = caller(ctx, (await createKeyWithScopes(ctx.db, org.organization_id, ['check'])).apiKey);
    expect((await checker.get('/org/webhook')).statusCode).toBe(403);
  });

  it('validates the delivery log query', async () => {
    expect((await api.get('/org/webhook/deliveries?status=pending&limit=5')).statusCode).toBe(200);
    expect((await api.get('/org/webhook/deliveries?status=lost')).statusCode).toBe(422);
    expect((await api.get('/org/webhook/deliveries?limit=0')).statusCode).toBe(422);
  });
});

describe("the console's webhook read", () => {
  it('answers 200 with null before a webhook exists (no 404 for the browser to log), then the webhook without its secret', async () => {
    const user = await signUp(ctx, 'hook');
    const browser = asBrowser(ctx, user);
    const none = await browser('GET', '/console/api/webhook');
    expect(none.statusCode, none.body).toBe(200);
    expect(none.json()).toEqual({ webhook: null });

    const created = await browser('PUT', '/org/webhook', { url: 'https://hooks.example.com/in' });
    expect(created.statusCode, created.body).toBe(201);
    const set = await browser('GET', '/console/api/webhook');
    expect(set.statusCode).toBe(200);
    expect(set.json()).toEqual({ webhook: (await browser('GET', '/org/webhook')).json() });
    expect(set.json().webhook).toMatchObject({ url: 'https://hooks.example.com/in', disabled: false });
    expect(set.body).not.toContain(created.json().secret);
  });

  it('needs a session or key of the organization, and takes no query parameters', async () => {
    expect((await ctx.app.inject({ method: 'GET', url: '/console/api/webhook' })).statusCode).toBe(401);
    const { ownApi } = await freshOrganization('https://hooks.example.com/own');
    expect((await ownApi.get('/console/api/webhook')).json().webhook.url).toBe(
      'https://hooks.example.com/own',
    );
    expect((await ownApi.get('/console/api/webhook?x=1')).statusCode).toBe(422);
  });
});
