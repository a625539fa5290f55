import { sql } from 'kysely';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '@ent/common/auth/api-key';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { bumpAuthVersion } from '../../src/features/shared/versions.ts';

/**
 * The one write path: every write under /org runs in the write pipeline's transaction (what must commit with it,
 * webhook deliveries, is recorded there), and a version moved in it is published before the write answers.
 */
let ctx: AdminTestContext;
let org: TestOrganization;
/** `METHOD route` of each write the pipeline saw inside its transaction, with the auth outbox rows seen there. */
const seen: { write: string; undoneAuthEntries: number }[] = [];

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Write path');
  ctx.app.writePipeline.beforeCommit(async (trx, request) => {
    const undone = await trx
      .selectFrom('outbox')
      .select('id')
      .where('organization_id', '=', org.organization_id)
      .where('kind', '=', 'auth')
      .where('done_at', 'is', null)
      .execute();
    seen.push({ write: `${request.method} ${request.routeOptions.url}`, undoneAuthEntries: undone.length });
  });
});
afterAll(async () => ctx?.close());

const send = async (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) => {
  const res = await ctx.app.inject({
    method,
    url,
    headers: org.headers,
    ...(payload === undefined ? {} : { payload }),
  });
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.statusCode === 204 ? null : res.json();
};

describe('every write under /org, members and keys included', () => {
  it('runs inside the write pipeline transaction, its version bump committed with it', async () => {
    const account = await send('POST', '/org/service-accounts', { name: 'ci', role: 'developer' });
    const key = await send('POST', `/org/service-accounts/${account.service_account_id}/api-keys`, {});
    await send('DELETE', `/org/service-accounts/${account.service_account_id}/api-keys/${key.key_id}`);
    await send('PATCH', `/org/service-accounts/${account.service_account_id}`, { name: 'ci-2' });
    const member = await send('POST', '/org/members', { email: 'pipeline@example.com', role: 'viewer' });
    await send('PATCH', `/org/members/${member.member_id}`, { role: 'developer' });
    const invite = await send('POST', '/org/invites', { role: 'viewer' });
    await send('DELETE', `/org/invites/${invite.invite_id}`);
    await send('PATCH', '/org', { name: 'Write path, renamed' });
    await send('PUT', '/org/webhook', { url: 'https://hooks.example.com/ent' });
    await send('POST', '/org/webhook/rotate');
    await send('POST', '/org/webhook/disable');
    await send('POST', '/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });

    expect(seen.map((entry) => entry.write)).toEqual([
      'POST /org/service-accounts',
      'POST /org/service-accounts/:service_account_id/api-keys',
      'DELETE /org/service-accounts/:service_account_id/api-keys/:key_id',
      'PATCH /org/service-accounts/:service_account_id',
      'POST /org/members',
      'PATCH /org/members/:member_id',
      'POST /org/invites',
      'DELETE /org/invites/:invite_id',
      'PATCH /org',
      'PUT /org/webhook',
      'POST /org/webhook/rotate',
      'POST /org/webhook/disable',
      'POST /org/features',
    ]);
    // The auth writes' outbox entries are in the transaction the pipeline runs (each published before its answer).
    for (const write of [
      'POST /org/service-accounts',
      'POST /org/service-accounts/:service_account_id/api-keys',
      'DELETE /org/service-accounts/:service_account_id/api-keys/:key_id',
      'POST /org/members',
      'PATCH /org/members/:member_id',
    ]) {
      expect(seen.find((entry) => entry.write === write)?.undoneAuthEntries, write).toBeGreaterThan(0);
    }
  });
});

describe('a version bumped inside writePipeline.run', () => {
  it('is published before run returns: the bump names its own publish target', async () => {
    const { keyId, apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    await ctx.app.snapshots.publishAuth(org.organization_id);
    const keyDoc = () => ctx.redis.hget(ctx.app.redisKeys.apiKey(hashApiKey(apiKey)), 'doc');
    expect(await keyDoc()).not.toBe('');

    const request = {
      method: 'POST',
      routeOptions: { url: '/test/revoke' },
      principal: { organizationId: org.organization_id },
      log: ctx.app.log,
    } as unknown as FastifyRequest;
    await ctx.app.writePipeline.run(request, async (trx, outcome) => {
      await sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId}`.execute(trx);
      await bumpAuthVersion(trx, outcome, org.organization_id);
    });
    expect(await keyDoc()).toBe('');
  });
});
