import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import type { GatewayApp } from '../../src/app.ts';
import { gatewayOverAdmin } from '../helpers.ts';

/** An admin write sent through the gateway: the key reaches admin, and the replay's header comes back. */
let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Acme');
  gateway = await gatewayOverAdmin(ctx);
});

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

const createFeature = (key: string, idempotencyKey: string, name = 'SSO') =>
  gateway.inject({
    method: 'POST',
    url: '/org/features',
    headers: { ...org.headers, 'idempotency-key': idempotencyKey },
    payload: { key, name, kind: 'flag' },
  });

describe('Idempotency-Key through the gateway', () => {
  it('a repeated write is replayed by admin with Idempotent-Replayed: true', async () => {
    const first = await createFeature('sso', 'through-gateway');
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const repeat = await createFeature('sso', 'through-gateway');
    expect(repeat.statusCode).toBe(201);
    expect(repeat.headers['idempotent-replayed']).toBe('true');
    expect(repeat.body).toBe(first.body);
  });

  it('another body under the same key: 422 IDEMPOTENCY_KEY_REUSED', async () => {
    expect((await createFeature('seats', 'reused-through-gateway')).statusCode).toBe(201);
    const other = await createFeature('seats', 'reused-through-gateway', 'Seats');
    expect(other.statusCode).toBe(422);
    expect(other.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });
});
