import { describe, expect, it } from 'vitest';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { planSuite } from './fixtures.ts';

const suite = planSuite();

describe('tenant isolation', () => {
  it("never shows, changes or deletes another organization's plans", async () => {
    const mine = await suite.world({ plans: true });
    const other = await suite.world({ features: [['other-only', 'flag']] });
    const asOther = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
      mine.inject(method, url, payload, other.org.headers);
    expect((await asOther('GET', '/org/plans/pro')).statusCode).toBe(404);
    expect((await asOther('PATCH', '/org/plans/pro', { name: 'hijack' })).statusCode).toBe(404);
    expect((await asOther('POST', '/org/plans/pro/archive')).statusCode).toBe(404);
    expect((await asOther('POST', '/org/plans/pro/unarchive')).statusCode).toBe(404);
    expect((await asOther('DELETE', '/org/plans/pro')).statusCode).toBe(404);
    expect((await asOther('GET', '/org/plans')).json()).toEqual({ plans: [], has_more: false });
    expect((await mine.inject('GET', '/org/plans/pro')).json()).toMatchObject({
      name: 'Pro',
      archived: false,
    });
  });

  it('lets each organization use the same key, and grants only its own features', async () => {
    const mine = await suite.world({ plans: true });
    const other = await suite.world({ features: [['other-only', 'flag']] });
    const same = await other.createPlan({
      key: 'pro',
      name: 'Their pro',
      kind: 'catalog',
      grants: [{ feature: 'other-only', kind: 'flag' }],
    });
    expect(same.statusCode).toBe(201);
    const foreign = await other.createPlan({
      key: 'sneaky',
      name: 'x',
      kind: 'catalog',
      grants: [{ feature: 'sso', kind: 'flag' }],
    });
    expect(foreign.statusCode).toBe(422);
    expect(foreign.json().error.details).toMatchObject({ field: 'grants.0.feature', value: 'sso' });
    const patch = await mine.inject('PATCH', '/org/plans/pro', {
      grants: [{ feature: 'other-only', kind: 'flag' }],
    });
    expect(patch.statusCode).toBe(422);
    expect((await mine.inject('GET', '/org/plans/pro')).json().name).toBe('Pro');
  });
});

describe('plan scopes', () => {
  it('lets catalog:read read but not write', async () => {
    const { inject, org, ctx } = await suite.world({ plans: true });
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    const headers = { 'x-api-key': apiKey };
    expect((await inject('GET', '/org/plans', undefined, headers)).statusCode).toBe(200);
    expect((await inject('GET', '/org/plans/pro', undefined, headers)).statusCode).toBe(200);
    for (const [method, url] of [
      ['POST', '/org/plans'],
      ['PATCH', '/org/plans/pro'],
      ['DELETE', '/org/plans/pro'],
      ['POST', '/org/plans/pro/archive'],
      ['POST', '/org/plans/pro/unarchive'],
    ] as const) {
      const res = await inject(
        method,
        url,
        method === 'DELETE' || url.endsWith('archive') ? undefined : { name: 'x' },
        headers,
      );
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json().error.code).toBe('FORBIDDEN');
    }
  });

  it('lets catalog:write write but not read', async () => {
    const { inject, createPlan, org, ctx } = await suite.world({ plans: true });
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:write']);
    const headers = { 'x-api-key': apiKey };
    expect((await inject('GET', '/org/plans', undefined, headers)).statusCode).toBe(403);
    expect((await inject('GET', '/org/plans/pro', undefined, headers)).statusCode).toBe(403);
    expect((await createPlan({ key: 'writer-made', name: 'x', kind: 'custom' }, headers)).statusCode).toBe(
      201,
    );
    expect((await inject('POST', '/org/plans/writer-made/archive', undefined, headers)).statusCode).toBe(200);
  });

  it('gives check-only keys and viewers 403 on writes', async () => {
    const { inject, createPlan, org, ctx } = await suite.world({ plans: true });
    const check = { 'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, ['check'])).apiKey };
    expect((await createPlan({ key: 'nope', name: 'x', kind: 'custom' }, check)).statusCode).toBe(403);
    expect((await inject('GET', '/org/plans', undefined, check)).statusCode).toBe(403);
    const viewer = {
      'x-api-key': (await createKeyWithScopes(ctx.db, org.organization_id, [], 'viewer')).apiKey,
    };
    expect((await inject('GET', '/org/plans', undefined, viewer)).statusCode).toBe(200);
    expect((await inject('DELETE', '/org/plans/free', undefined, viewer)).statusCode).toBe(403);
    expect((await inject('GET', '/org/plans/free')).statusCode).toBe(200);
  });

  it('answers 401 without a key', async () => {
    expect((await suite.context().app.inject({ method: 'GET', url: '/org/plans' })).statusCode).toBe(401);
  });
});

describe('OpenAPI', () => {
  it('documents all seven plan routes', async () => {
    const doc = (await suite.context().app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths['/org/plans']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/org/plans/{key}']).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.paths['/org/plans/{key}/archive'].post).toBeDefined();
    expect(doc.paths['/org/plans/{key}/unarchive'].post).toBeDefined();
  });

  it('documents the two eval routes too (answered by the gateway, served in the same document)', async () => {
    const doc = (await suite.context().app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const check = doc.paths['/org/subscribers/{subscriber_id}/entitlements/check'].post;
    expect(check.parameters).toEqual([
      expect.objectContaining({ in: 'path', name: 'subscriber_id', required: true }),
      // A consume's key (DESIGN.md §5, "Idempotent usage").
      expect.objectContaining({ in: 'header', name: 'Idempotency-Key', required: false }),
    ]);
    expect(check.requestBody.content['application/json'].schema).toMatchObject({ required: ['feature'] });
    expect(check.responses['200'].headers).toHaveProperty('X-Svc-Eval-Warn');
    expect(Object.keys(check.responses).sort()).toEqual([
      '200',
      '401',
      '403',
      '404',
      '409',
      '413',
      '415',
      '422',
      '429',
      '503',
    ]);
    const list = doc.paths['/org/subscribers/{subscriber_id}/entitlements'].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(['subscriber_id', 'all']);
    expect(list.responses['200'].content['application/json'].schema).toMatchObject({
      required: ['subscriber_id', 'entitlements'],
    });
    expect(doc.paths['/org/plans'].post).toBeDefined();
    expect(doc.paths['/org/usage/current'].get).toBeDefined();
  });
});
