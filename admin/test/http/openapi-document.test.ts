import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';

/** What /openapi.json says of the answers every route can give, whatever its own schema declares. */
type Response = { description: string; headers?: Record<string, unknown>; content?: unknown };
type Operation = {
  operationId?: string;
  security?: Array<Record<string, unknown>>;
  parameters?: Array<{ name: string; in: string }>;
  requestBody?: { content?: Record<string, unknown> };
  responses: Record<string, Response>;
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
};

let ctx: AdminTestContext;
let document: Document;
let operations: Array<{ method: string; path: string; operation: Operation }>;

beforeAll(async () => {
  ctx = await createAdminContext();
  document = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  operations = Object.entries(document.paths).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, operation]) => ({ method, path, operation })),
  );
});
afterAll(() => ctx.close());

const named = (list: Array<{ method: string; path: string }>) =>
  list.map(({ method, path }) => `${method} ${path}`);

describe('/openapi.json', () => {
  it("documents 409 on every admin write that takes an Idempotency-Key, not on the gateway's usage routes", () => {
    const keyed = operations.filter(({ operation }) =>
      operation.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'),
    );
    // The gateway's consume and usage keys live in one Lua call: a repeat is a replay, never a 409.
    const gatewayKeyed = ['post /org/subscribers/{subscriber_id}/usage', 'post /org/usage-events'];
    const adminKeyed = keyed.filter(
      ({ method, path }) =>
        !gatewayKeyed.includes(`${method} ${path}`) && !path.endsWith('/entitlements/check'),
    );
    expect(adminKeyed.length).toBeGreaterThan(30);
    expect(named(adminKeyed.filter(({ operation }) => !operation.responses['409']))).toEqual([]);
    for (const route of gatewayKeyed) {
      const [method, path] = route.split(' ') as [string, string];
      expect(document.paths[path]![method]!.responses['409']).toBeUndefined();
    }
  });

  it('documents 413 and 415 on every operation with a JSON body', () => {
    const withBody = operations.filter(
      ({ operation }) => operation.requestBody?.content?.['application/json'],
    );
    expect(withBody.length).toBeGreaterThan(20);
    expect(
      named(withBody.filter(({ operation }) => !operation.responses['413'] || !operation.responses['415'])),
    ).toEqual([]);
  });

  it('documents 429 with Retry-After on every /org operation, and Retry-After on every 429', () => {
    const org = operations.filter(({ path }) => path.startsWith('/org'));
    expect(named(org.filter(({ operation }) => !operation.responses['429']))).toEqual([]);
    const without = operations.filter(
      ({ operation }) => operation.responses['429'] && !operation.responses['429'].headers?.['Retry-After'],
    );
    expect(named(without)).toEqual([]);
  });

  it('describes every response, and names every operation once', () => {
    const generic = operations.flatMap(({ method, path, operation }) =>
      Object.entries(operation.responses)
        .filter(([, response]) => !response.description || response.description === 'Default Response')
        .map(([status]) => `${method} ${path} ${status}`),
    );
    expect(generic).toEqual([]);
    const ids = operations.map(({ operation }) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z]+[A-Za-z0-9]*$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(document.paths['/org/features/{key}']!.patch!.operationId).toBe('patchOrgFeaturesByKey');
  });

  it('names its component schemas by their $id', () => {
    const names = Object.keys(document.components.schemas);
    expect(names).toEqual(expect.arrayContaining(['ErrorBody', 'Feature', 'Plan', 'Credit', 'AuditEvent']));
    expect(names.filter((name) => /^def-\d+$/.test(name))).toEqual([]);
  });

  it('lets OFREP take the key as Authorization: Bearer, and only OFREP', () => {
    expect(document.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    const bearer = operations.filter(({ operation }) => operation.security?.some((s) => 'bearer' in s));
    expect(named(bearer).sort()).toEqual([
      'post /ofrep/v1/evaluate/flags',
      'post /ofrep/v1/evaluate/flags/{key}',
    ]);
  });

  it('documents the answers the running routes give to a wrong content type and an oversized body', async () => {
    const org = await createTestOrganization(ctx.db);
    const send = (headers: Record<string, string>, payload: string) =>
      ctx.app.inject({
        method: 'POST',
        url: '/org/features',
        headers: { ...org.headers, ...headers },
        payload,
      });
    const wrongType = await send({ 'content-type': 'text/plain' }, 'x');
    const oversized = await send(
      { 'content-type': 'application/json' },
      JSON.stringify({ key: 'big', name: 'Big', kind: 'flag', description: 'x'.repeat(3 * 1024 * 1024) }),
    );
    expect([wrongType.statusCode, oversized.statusCode]).toEqual([415, 413]);
    const responses = document.paths['/org/features']!.post!.responses;
    const errorBody = { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } };
    expect(document.components.schemas.ErrorBody).toMatchObject({ required: ['error'] });
    expect(responses['415']!.content).toEqual(errorBody);
    expect(responses['413']!.content).toEqual(errorBody);
  });
});
