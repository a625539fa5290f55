import { sql } from 'kysely';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashApiKey } from '@ent/common/auth/api-key';
import {
  createAdminContext,
  createTestOrganization,
  subscriberVersion,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import { bumpAuthVersion, bumpSubscriberVersion } from '../../src/features/shared/versions.ts';
import { WriteOutcome } from '../../src/features/shared/write/outcome.ts';

/**
 * Writes raced against each other, as a black-box audit did: every 2xx must mean its change is what evals see, no
 * race may end in a 500, and no credential may outlive the change that should have revoked it.
 */
let ctx: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Races');
});
afterAll(async () => ctx?.close());

const send = (
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  payload?: object,
  headers = org.headers,
) => ctx.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });

const ROUNDS = 8;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Another transaction holds the organization's row, so writes queue on it in the order they are sent. */
async function holdOrganization(): Promise<() => Promise<void>> {
  let release!: () => void;
  const held = ctx.db.transaction().execute(async (trx) => {
    await sql`SELECT id FROM organizations WHERE id = ${org.organization_id} FOR NO KEY UPDATE`.execute(trx);
    await new Promise<void>((resolve) => (release = resolve));
  });
  await sleep(50);
  return async () => {
    release();
    await held;
  };
}

describe('a write that finds its change already made (an identical write just before it)', () => {
  it('publishes the revoked key before its 204, even if the first revoke has not published yet', async () => {
    const { serviceAccountId, keyId, apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, [
      'check',
    ]);
    await ctx.app.snapshots.publishAuth(org.organization_id);
    const keyDoc = () => ctx.redis.hget(ctx.app.redisKeys.apiKey(hashApiKey(apiKey)), 'doc');
    expect(await keyDoc()).not.toBe('');
    // The first revoke, committed with its outbox entry but not yet published: what the second one finds.
    await ctx.db.transaction().execute(async (trx) => {
      await sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId}`.execute(trx);
      await bumpAuthVersion(trx, new WriteOutcome(), org.organization_id);
    });

    const repeated = await send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`);
    expect(repeated.statusCode).toBe(204);
    expect(await keyDoc()).toBe('');
  });

  it('publishes the subscriber the override belongs to before its 200', async () => {
    await send('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
    await send('POST', '/org/subscribers', { subscriber_id: 'ann' });
    const put = await send('PUT', '/org/subscribers/ann/overrides/seats', { kind: 'limit', limit: 5 });
    expect(put.statusCode).toBeLessThan(300);
    // The first PUT of limit 9, committed with its outbox entry but not yet published.
    await ctx.db.transaction().execute(async (trx) => {
      await sql`UPDATE overrides SET limit_value = 9 WHERE subscriber_id = 'ann' AND organization_id = ${org.organization_id}`.execute(
        trx,
      );
      await bumpSubscriberVersion(trx, new WriteOutcome(), org.organization_id, 'ann');
    });

    const repeated = await send('PUT', '/org/subscribers/ann/overrides/seats', { kind: 'limit', limit: 9 });
    expect(repeated.statusCode).toBe(200);
    const published = await ctx.redis.hget(ctx.app.redisKeys.subscriberVersions(org.organization_id), 'ann');
    // Redis numbers a subscriber's versions one above Postgres's (0 there means none).
    expect(Number(published)).toBe((await subscriberVersion(ctx.db, org.organization_id, 'ann')) + 1);
  });
});

describe('a repeated write with nothing left undone', () => {
  it('publishes nothing: one outbox query, not a republish of every key', async () => {
    const { serviceAccountId, keyId } = await createKeyWithScopes(ctx.db, org.organization_id, ['check']);
    const revoked = await send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`);
    expect(revoked.statusCode).toBe(204);
    const publishAuth = vi.spyOn(ctx.app.snapshots, 'publishAuth');
    try {
      const again = await send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`);
      expect(again.statusCode).toBe(204);
      expect(publishAuth).not.toHaveBeenCalled();
    } finally {
      publishAuth.mockRestore();
    }
  });
});

describe('a transaction Postgres ends as a deadlock victim', () => {
  it('is run again by the write pipeline, reporting only what the attempt that committed did', async () => {
    const request = {} as FastifyRequest;
    let attempts = 0;
    const result = await ctx.app.writePipeline.run(request, async (_trx, outcome) => {
      attempts += 1;
      outcome.subscribersChanged.add(`attempt-${attempts}`);
      if (attempts === 1) throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
      return 'committed';
    });
    expect(result).toBe('committed');
    expect([...ctx.app.writePipeline.outcomeOf(request)!.subscribersChanged]).toEqual(['attempt-2']);
  });
});

describe('writes that lock the same rows in opposite orders', () => {
  it('a plan deleted while a plan of the same key is created: never a 500', async () => {
    const statuses: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const key = `race_${round}`;
      expect((await send('POST', '/org/plans', { key, name: key, kind: 'catalog' })).statusCode).toBe(201);
      const [deleted, created] = await Promise.all([
        send('DELETE', `/org/plans/${key}`),
        send('POST', '/org/plans', { key, name: `${key} again`, kind: 'catalog' }),
      ]);
      statuses.push(deleted.statusCode, created.statusCode);
    }
    expect(statuses.filter((status) => status >= 500)).toEqual([]);
  });

  it("a key revoked while its service account's member is removed: never a 500, and the key ends revoked", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { serviceAccountId, memberId, keyId } = await createKeyWithScopes(ctx.db, org.organization_id, [
        'check',
      ]);
      const [removed, revoked] = await Promise.all([
        send('PATCH', `/org/members/${memberId}`, { status: 'removed' }),
        send('DELETE', `/org/service-accounts/${serviceAccountId}/api-keys/${keyId}`),
      ]);
      expect([removed.statusCode, revoked.statusCode]).toEqual([200, 204]);
      const key = await ctx.db
        .selectFrom('api_keys')
        .select('revoked_at')
        .where('id', '=', keyId)
        .executeTakeFirstOrThrow();
      expect(key.revoked_at).not.toBeNull();
    }
  });

  it('the first webhook put by several requests at once: one 201, the rest 200, never a 409', async () => {
    const racer = await createTestOrganization(ctx.db, 'Webhook race');
    const puts = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        send('PUT', '/org/webhook', { url: `https://hooks.example.com/${i}`, disabled: true }, racer.headers),
      ),
    );
    expect(puts.map((put) => put.statusCode).sort()).toEqual([200, 200, 200, 200, 200, 201]);
  });
});

describe('a credential made while its maker or holder is being taken away', () => {
  it('an invite made while its maker is suspended is refused or revoked, never left live', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const maker = await createKeyWithScopes(ctx.db, org.organization_id, [], 'admin');
      const [suspended, invited] = await Promise.all([
        send('PATCH', `/org/members/${maker.memberId}`, { status: 'suspended' }),
        send('POST', '/org/invites', { role: 'admin' }, { 'x-api-key': maker.apiKey }),
      ]);
      expect(suspended.statusCode).toBe(200);
      expect([201, 401]).toContain(invited.statusCode);
      const live = await ctx.db
        .selectFrom('invites')
        .select('id')
        .where('created_by_member_id', '=', maker.memberId)
        .where('revoked_at', 'is', null)
        .execute();
      expect(live).toEqual([]);
    }
  });

  it("a request queued behind its own caller's revocation, suspension or demotion grants nothing", async () => {
    type Caller = Awaited<ReturnType<typeof createKeyWithScopes>>;
    const changes: { name: string; send: (caller: Caller) => ReturnType<typeof send>; refused: number }[] = [
      {
        name: 'suspended',
        send: (c) => send('PATCH', `/org/members/${c.memberId}`, { status: 'suspended' }),
        refused: 401,
      },
      {
        name: 'demoted',
        send: (c) => send('PATCH', `/org/members/${c.memberId}`, { role: 'developer' }),
        refused: 403,
      },
      {
        name: 'key revoked',
        send: (c) => send('DELETE', `/org/service-accounts/${c.serviceAccountId}/api-keys/${c.keyId}`),
        refused: 401,
      },
    ];
    for (const change of changes) {
      const caller = await createKeyWithScopes(ctx.db, org.organization_id, [], 'admin');
      const target = await createKeyWithScopes(ctx.db, org.organization_id, ['check'], 'admin');
      const release = await holdOrganization();
      const changed = change.send(caller);
      await sleep(150);
      const minted = send(
        'POST',
        `/org/service-accounts/${target.serviceAccountId}/api-keys`,
        { scopes: [] },
        {
          'x-api-key': caller.apiKey,
        },
      );
      await sleep(150);
      await release();
      expect((await changed).statusCode, change.name).toBeLessThan(300);
      expect((await minted).statusCode, change.name).toBe(change.refused);
      const mintedKeys = await ctx.db
        .selectFrom('api_keys')
        .select('id')
        .where('service_account_id', '=', target.serviceAccountId)
        .where('id', '!=', target.keyId)
        .execute();
      expect(mintedKeys, change.name).toEqual([]);
    }
  });

  it('a full-access key for a service account promoted meanwhile needs a caller who may grant the new role', async () => {
    const developer = await createKeyWithScopes(ctx.db, org.organization_id, [], 'developer');
    const target = await createKeyWithScopes(ctx.db, org.organization_id, ['check'], 'developer');
    const release = await holdOrganization();
    const promoted = send('PATCH', `/org/members/${target.memberId}`, { role: 'admin' });
    await sleep(150);
    const minted = send(
      'POST',
      `/org/service-accounts/${target.serviceAccountId}/api-keys`,
      { scopes: [] },
      {
        'x-api-key': developer.apiKey,
      },
    );
    await sleep(150);
    await release();
    expect((await promoted).statusCode).toBe(200);
    expect((await minted).statusCode).toBe(403);
  });

  it("a key made while its service account's member is removed is refused or revoked, never left live", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { serviceAccountId, memberId } = await createKeyWithScopes(ctx.db, org.organization_id, [
        'check',
      ]);
      const [removed, created] = await Promise.all([
        send('PATCH', `/org/members/${memberId}`, { status: 'removed' }),
        send('POST', `/org/service-accounts/${serviceAccountId}/api-keys`, { name: 'raced' }),
      ]);
      expect(removed.statusCode).toBe(200);
      expect([201, 409]).toContain(created.statusCode);
      const live = await ctx.db
        .selectFrom('api_keys')
        .select('id')
        .where('service_account_id', '=', serviceAccountId)
        .where('revoked_at', 'is', null)
        .execute();
      expect(live).toEqual([]);
    }
  });
});
