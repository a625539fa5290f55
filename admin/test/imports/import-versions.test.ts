import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { redisKeys } from '@ent/common/redis/keys';
import { snapshotStore } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { ndjson, runImport } from './run-import.ts';

let ctx: AdminTestContext;

beforeAll(async () => {
  // One batch holds a whole body: a subscriber and its subscription are written in the same transaction.
  ctx = await createAdminContext({ imports: { runner: { batchSize: 100 } } });
});
afterAll(() => ctx.close());

/** The records as one NDJSON body, imported to the end. */
const importRecords = (org: TestOrganization, records: unknown[]) => runImport(ctx, org, ndjson(records));

/**
 * Each subscriber's Postgres version and how many outbox entries name it, all done: an import batch's one
 * `subscribers` entry names every subscriber the batch changed.
 */
async function versionsOf(org: TestOrganization, subscriberId: string) {
  const subscriber = await ctx.db
    .selectFrom('subscribers')
    .select('version')
    .where('organization_id', '=', org.organization_id)
    .where('subscriber_id', '=', subscriberId)
    .executeTakeFirstOrThrow();
  const { rows: entries } = await sql<{ kind: string; done_at: Date | null; created_at: Date; next_attempt_at: Date }>`
    SELECT kind, done_at, created_at, next_attempt_at FROM outbox
    WHERE organization_id = ${org.organization_id}
      AND (subject = ${subscriberId} OR ${subscriberId} = ANY(subjects))
  `.execute(ctx.db);
  expect(entries.every((e) => e.done_at !== null && e.kind === 'subscribers')).toBe(true);
  // Left to the runner for its lease (30 s): the relay publishes them only if the runner died first.
  for (const e of entries)
    expect(e.next_attempt_at.getTime() - e.created_at.getTime()).toBeGreaterThanOrEqual(29_000);
  return { version: Number(subscriber.version), outbox: entries.length };
}

/** The organization's outbox entries: one per import batch that changed subscribers, however many. */
async function entriesOf(org: TestOrganization) {
  return ctx.db
    .selectFrom('outbox')
    .select(['kind', 'subjects'])
    .where('organization_id', '=', org.organization_id)
    .orderBy('id')
    .execute();
}

const PLANS = ['basic', 'pro'].map((key) => ({ type: 'plan', key, name: key, kind: 'catalog', grants: [] }));

describe('import versions', () => {
  it('bumps each subscriber a batch changes once, in the write of its subscriber line when it has one', async () => {
    const org = await createTestOrganization(ctx.db);
    const store = snapshotStore(ctx.redis, redisKeys(ctx.config.redisKeyPrefix));
    const created = await importRecords(org, [
      ...PLANS,
      { type: 'subscriber', subscriber_id: 'named', name: 'Named' },
      { type: 'subscriber', subscriber_id: 'unnamed' },
      { type: 'subscription', subscriber_id: 'named', plan_id: 'basic' },
    ]);
    expect(created).toMatchObject({ status: 'succeeded', applied: 5, failed: 0 });
    expect(await versionsOf(org, 'named')).toEqual({ version: 1, outbox: 1 });
    expect(await versionsOf(org, 'unnamed')).toEqual({ version: 1, outbox: 1 });
    expect((await entriesOf(org)).filter((e) => e.kind !== 'catalog')).toEqual([
      { kind: 'subscribers', subjects: ['named', 'unnamed'] },
    ]);
    expect((await store.readSubscriber(org.organization_id, 'named'))?.version).toBe(2);

    // Renamed and subscribed in one batch: one bump; subscribed only (no subscriber line): one bump.
    const changed = await importRecords(org, [
      { type: 'subscriber', subscriber_id: 'named', name: 'Renamed' },
      { type: 'subscription', subscriber_id: 'named', plan_id: 'pro' },
      { type: 'subscription', subscriber_id: 'unnamed', plan_id: 'pro' },
      { type: 'subscriber', subscriber_id: 'unnamed' },
    ]);
    expect(changed).toMatchObject({ status: 'succeeded', applied: 3, unchanged: 1, failed: 0 });
    expect(await versionsOf(org, 'named')).toEqual({ version: 2, outbox: 2 });
    expect(await versionsOf(org, 'unnamed')).toEqual({ version: 2, outbox: 2 });
    const named = await store.readSubscriber(org.organization_id, 'named');
    expect(named?.version).toBe(3);
    expect(named?.doc.plans).toHaveLength(2);

    // Nothing to change: no bump, no entry.
    const again = await importRecords(org, [{ type: 'subscriber', subscriber_id: 'named', name: 'Renamed' }]);
    expect(again).toMatchObject({ applied: 0, unchanged: 1 });
    expect(await versionsOf(org, 'named')).toEqual({ version: 2, outbox: 2 });
  });
});
