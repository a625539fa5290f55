import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ExportLineSchema, type ExportLine } from '@ent/contract/exports';
import { CreateFeatureBody } from '@ent/contract/features';
import { CreatePlanBody } from '@ent/contract/plans';
import { CreateSubscriberBody } from '@ent/contract/subscribers';
import { CreateSubscriptionBody } from '@ent/contract/subscriptions';
import { PutOverrideBody } from '@ent/contract/overrides';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

// Value.Check knows no formats of its own; admin validates them with Ajv's.
if (!FormatRegistry.Has('date-time'))
  FormatRegistry.Set('date-time', (value) => !Number.isNaN(Date.parse(value)));

let ctx: AdminTestContext;
let org: TestOrganization;
let other: TestOrganization;

/** More than two of the export's pages (5,000 subscribers each), so the windows' boundaries are crossed. */
const BULK_SUBSCRIBERS = 10_500;

const send = (method: 'POST' | 'PUT', url: string, payload: object, headers = org.headers) =>
  ctx.app.inject({ method, url, headers, payload }).then((res) => {
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  });

const exportOf = (headers = org.headers) => ctx.app.inject({ method: 'GET', url: '/org/export', headers });

function parse(body: string): ExportLine[] {
  expect(body.endsWith('\n')).toBe(true);
  return body
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as ExportLine);
}

beforeAll(async () => {
  ctx = await createAdminContext();
  org = await createTestOrganization(ctx.db, 'Exported');
  other = await createTestOrganization(ctx.db, 'Other');
  await send('POST', '/org/features', {
    key: 'sso',
    name: 'SSO',
    kind: 'flag',
    description: 'single sign-on',
  });
  await send('POST', '/org/features', { key: 'seats', name: 'Seats', kind: 'limit' });
  await send('POST', '/org/features', { key: 'api-calls', name: 'API calls', kind: 'metered' });
  await send('POST', '/org/plans', {
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 10 },
      { feature: 'api-calls', kind: 'metered', limit: 1000, reset: 'day', soft: true },
    ],
  });
  await send('POST', '/org/plans', { key: 'basic', name: 'Basic', kind: 'catalog' });
  await send('POST', '/org/plans', { key: 'legacy', name: 'Legacy', kind: 'custom', grants: [] });
  await send('POST', '/org/plans/legacy/archive', {});
  await send('POST', '/org/subscribers', { subscriber_id: 'alice', name: 'Alice' });
  await send('POST', '/org/subscribers/alice/subscriptions', { plan_id: 'pro' });
  await send('POST', '/org/subscribers/alice/subscriptions', { plan_id: 'basic' });
  await send('POST', '/org/subscribers', { subscriber_id: 'bob' });
  await send('POST', '/org/subscribers/bob/subscriptions', { plan_id: 'basic' });
  await send('POST', '/org/subscribers/bob/subscriptions/change', { plan_id: 'pro' });
  await send('PUT', '/org/subscribers/alice/overrides/sso', { kind: 'flag', allowed: false });
  await send('PUT', '/org/subscribers/bob/overrides/seats', {
    kind: 'limit',
    limit: null,
    expires_at: '2030-01-02T03:04:05.678Z',
  });
  await send('POST', '/org/subscribers', { subscriber_id: 'carol' }, other.headers);
  // The bulk of subscribers straight in Postgres: through the API they would take minutes.
  await sql`
    INSERT INTO subscribers (organization_id, subscriber_id, name)
    SELECT ${org.organization_id}, 'bulk-' || lpad(g::text, 6, '0'), CASE WHEN g % 2 = 0 THEN 'B ' || g END
    FROM generate_series(1, ${BULK_SUBSCRIBERS}) AS g
  `.execute(ctx.ownerDb);
  await sql`
    INSERT INTO subscriptions (id, organization_id, subscriber_id, plan_id)
    SELECT 'sub_bulk_' || g, ${org.organization_id}, 'bulk-' || lpad(g::text, 6, '0'), p.id
    FROM generate_series(1, ${BULK_SUBSCRIBERS}) AS g, plans p
    WHERE p.organization_id = ${org.organization_id} AND p.key = 'basic'
  `.execute(ctx.ownerDb);
}, 120_000);
afterAll(() => ctx.close());

describe('GET /org/export', () => {
  it('streams NDJSON: each line its single-write route body with its type, in dependency order', async () => {
    const res = await exportOf();
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const records = parse(res.body);
    for (const record of records)
      expect(Value.Check(ExportLineSchema, record), JSON.stringify(record)).toBe(true);

    const order = ['feature', 'plan', 'subscriber', 'subscription', 'override'];
    const ranks = records.map((record) => order.indexOf(record.type));
    expect(ranks).toEqual([...ranks].sort((a, b) => a - b));

    const ofType = <T extends ExportLine['type']>(type: T) =>
      records.filter((record): record is Extract<ExportLine, { type: T }> => record.type === type);
    const withoutType = ({ type: _type, ...body }: ExportLine) => body;

    expect(ofType('feature')).toEqual([
      { type: 'feature', key: 'api-calls', name: 'API calls', kind: 'metered', description: '' },
      { type: 'feature', key: 'seats', name: 'Seats', kind: 'limit', description: '' },
      { type: 'feature', key: 'sso', name: 'SSO', kind: 'flag', description: 'single sign-on' },
    ]);
    for (const feature of ofType('feature'))
      expect(Value.Check(CreateFeatureBody, withoutType(feature))).toBe(true);

    expect(ofType('plan')).toEqual([
      { type: 'plan', key: 'basic', name: 'Basic', kind: 'catalog', grants: [] },
      { type: 'plan', key: 'legacy', name: 'Legacy', kind: 'custom', grants: [], archived: true },
      {
        type: 'plan',
        key: 'pro',
        name: 'Pro',
        kind: 'catalog',
        grants: [
          {
            feature: 'api-calls',
            kind: 'metered',
            limit: 1000,
            reset: 'day',
            reset_anchor: 'calendar',
            soft: true,
            rollover: null,
          },
          { feature: 'seats', kind: 'limit', limit: 10 },
          { feature: 'sso', kind: 'flag' },
        ],
      },
    ]);
    const { archived: _archived, ...legacyBody } = withoutType(ofType('plan')[1]!) as { archived?: true };
    expect(Value.Check(CreatePlanBody, legacyBody)).toBe(true);

    const subscribers = ofType('subscriber');
    expect(subscribers).toHaveLength(BULK_SUBSCRIBERS + 2);
    expect(subscribers.slice(0, 2)).toEqual([
      { type: 'subscriber', subscriber_id: 'alice', name: 'Alice' },
      { type: 'subscriber', subscriber_id: 'bob', name: null },
    ]);
    expect(subscribers[2]).toEqual({ type: 'subscriber', subscriber_id: 'bulk-000001', name: null });
    expect(subscribers[3]).toEqual({ type: 'subscriber', subscriber_id: 'bulk-000002', name: 'B 2' });
    expect(subscribers.at(-1)).toEqual({ type: 'subscriber', subscriber_id: 'bulk-010500', name: 'B 10500' });
    expect(new Set(subscribers.map((s) => s.subscriber_id)).size).toBe(subscribers.length);
    expect(subscribers.some((s) => s.subscriber_id === 'carol')).toBe(false);
    for (const subscriber of subscribers.slice(0, 3))
      expect(Value.Check(CreateSubscriberBody, withoutType(subscriber))).toBe(true);

    // Active ones only: bob's basic was ended by the change.
    const subscriptions = ofType('subscription');
    expect(subscriptions).toHaveLength(BULK_SUBSCRIBERS + 3);
    // With the anchor of their subscription-anchored periods: bob's pro keeps the one of the basic it replaced.
    const anchors = await ctx.db
      .selectFrom('subscriptions as s')
      .innerJoin('plans as p', 'p.id', 's.plan_id')
      .select(['s.subscriber_id', 'p.key', 's.anchored_at'])
      .where('s.organization_id', '=', org.organization_id)
      .where('s.status', '=', 'active')
      .where('s.subscriber_id', 'in', ['alice', 'bob'])
      .execute();
    const anchorOf = (subscriber: string, plan: string) =>
      anchors.find((a) => a.subscriber_id === subscriber && a.key === plan)!.anchored_at.toISOString();
    expect(subscriptions.slice(0, 3)).toEqual([
      {
        type: 'subscription',
        subscriber_id: 'alice',
        plan_id: 'basic',
        anchored_at: anchorOf('alice', 'basic'),
      },
      { type: 'subscription', subscriber_id: 'alice', plan_id: 'pro', anchored_at: anchorOf('alice', 'pro') },
      { type: 'subscription', subscriber_id: 'bob', plan_id: 'pro', anchored_at: anchorOf('bob', 'pro') },
    ]);
    expect(new Set(subscriptions.map((s) => s.subscriber_id)).size).toBe(BULK_SUBSCRIBERS + 2);
    const {
      subscriber_id: _subscriber,
      anchored_at: _anchor,
      ...subscriptionBody
    } = withoutType(subscriptions[0]!) as {
      subscriber_id: string;
      anchored_at: string;
    };
    expect(Value.Check(CreateSubscriptionBody, subscriptionBody)).toBe(true);

    expect(ofType('override')).toEqual([
      {
        type: 'override',
        subscriber_id: 'alice',
        feature_key: 'sso',
        kind: 'flag',
        allowed: false,
        expires_at: null,
      },
      {
        type: 'override',
        subscriber_id: 'bob',
        feature_key: 'seats',
        kind: 'limit',
        limit: null,
        expires_at: '2030-01-02T03:04:05.678Z',
      },
    ]);
    for (const override of ofType('override')) {
      const {
        subscriber_id: _s,
        feature_key: _f,
        ...body
      } = withoutType(override) as { subscriber_id: string; feature_key: string };
      expect(Value.Check(PutOverrideBody, body)).toBe(true);
    }
  }, 60_000);

  it('answers an empty organization with an empty body', async () => {
    const empty = await createTestOrganization(ctx.db, 'Empty');
    const res = await exportOf(empty.headers);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
  });

  it('needs both catalog:read and subscribers:read', async () => {
    for (const scopes of [['catalog:read'], ['subscribers:read']] as const) {
      const key = await createKeyWithScopes(ctx.db, org.organization_id, [...scopes]);
      const res = await exportOf({ 'x-api-key': key.apiKey });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe('FORBIDDEN');
    }
    const key = await createKeyWithScopes(
      ctx.db,
      org.organization_id,
      ['catalog:read', 'subscribers:read'],
      'viewer',
    );
    expect((await exportOf({ 'x-api-key': key.apiKey })).statusCode).toBe(200);
  }, 60_000);

  it('does not hold a connection after the export (its snapshot transaction ends)', async () => {
    await exportOf();
    const open = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND state LIKE 'idle in transaction%'
    `.execute(ctx.ownerDb);
    expect(open.rows[0]!.n).toBe(0);
  }, 60_000);

  it('ends its snapshot transaction when the client goes away midway', async () => {
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = ctx.app.server.address() as AddressInfo;
    const abort = new AbortController();
    const res = await fetch(`http://127.0.0.1:${port}/org/export`, {
      headers: org.headers,
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    abort.abort();
    const openTransactions = async () =>
      (
        await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state LIKE 'idle in transaction%'
        `.execute(ctx.ownerDb)
      ).rows[0]!.n;
    for (let polls = 0; (await openTransactions()) > 0; polls++) {
      expect(polls, 'a transaction still open 10 s after the client left').toBeLessThan(100);
      await sleep(100);
    }
    expect((await exportOf()).statusCode).toBe(200);
    // The aborted connection's socket is the client's to drop; the server would otherwise wait for it at close.
    ctx.app.server.closeAllConnections();
  }, 60_000);
});
