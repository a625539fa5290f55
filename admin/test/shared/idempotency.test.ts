import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

let ctx: AdminTestContext;
let org: TestOrganization;
let otherOrg: TestOrganization;
let counter = 0;
/** The app's clock is real time moved on by this much: a test steps past the prune's idle wait. */
let clockSkewMs = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;

const createSubscriber = (subscriberId: string, key: string | undefined, headers = org.headers) =>
  ctx.app.inject({
    method: 'POST',
    url: '/org/subscribers',
    headers: { ...headers, ...(key === undefined ? {} : { 'idempotency-key': key }) },
    payload: { subscriber_id: subscriberId },
  });

const subscriberCount = async (subscriberId: string) =>
  (
    await ctx.ownerDb
      .selectFrom('subscribers')
      .select('subscriber_id')
      .where('organization_id', '=', org.organization_id)
      .where('subscriber_id', '=', subscriberId)
      .execute()
  ).length;

const storedKey = (key: string, organizationId = org.organization_id) =>
  ctx.ownerDb
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('key', '=', key)
    .executeTakeFirst();

/** Rows of keys that expired a day ago, as a write 48 h old leaves them. */
const insertExpired = (keys: string[]) =>
  ctx.ownerDb
    .insertInto('idempotency_keys')
    .values(
      keys.map((key) => ({
        organization_id: org.organization_id,
        key,
        fingerprint: 'old',
        response_status: 201,
        response_content_type: null,
        response_body: '',
        created_at: new Date(Date.now() - 48 * 3600_000),
        expires_at: new Date(Date.now() - 24 * 3600_000),
      })),
    )
    .execute();

beforeAll(async () => {
  ctx = await createAdminContext({ clock: { now: () => Date.now() + clockSkewMs } });
  org = await createTestOrganization(ctx.db, 'Acme');
  otherOrg = await createTestOrganization(ctx.db, 'Globex');
});
afterAll(() => ctx.close());

describe('the Idempotency-Key header', () => {
  it.each([
    ['empty', ''],
    ['longer than 255 characters', 'k'.repeat(256)],
    ['not printable ASCII', 'tab\there'],
  ])('is refused with 422 naming the header when %s', async (_case, key) => {
    const subscriberId = unique('invalid');
    const res = await createSubscriber(subscriberId, key);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: { field: 'Idempotency-Key' },
    });
    expect(res.json().error.message).toMatch(/Idempotency-Key/);
    expect(await subscriberCount(subscriberId)).toBe(0);
  });

  it('takes 255 printable characters', async () => {
    const key = `${unique('k')} ~!`.padEnd(255, 'x');
    expect((await createSubscriber(unique('long'), key)).statusCode).toBe(201);
  });

  it('writes without a key as before, every time', async () => {
    const subscriberId = unique('nokey');
    expect((await createSubscriber(subscriberId, undefined)).statusCode).toBe(201);
    expect((await createSubscriber(subscriberId, undefined)).statusCode).toBe(409);
  });
});

describe('keys and what is stored', () => {
  it('are per organization: another organization using the same key makes its own write', async () => {
    const key = unique('shared');
    const subscriberId = unique('both');
    expect((await createSubscriber(subscriberId, key)).statusCode).toBe(201);
    const other = await createSubscriber(subscriberId, key, otherOrg.headers);
    expect(other.statusCode).toBe(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
  });

  it('another member of the organization reusing a key gets 422, never the first response', async () => {
    const key = unique('member');
    const subscriberId = unique('mine');
    expect((await createSubscriber(subscriberId, key)).statusCode).toBe(201);
    const { apiKey } = await createKeyWithScopes(ctx.db, org.organization_id, [], 'admin');
    const res = await createSubscriber(subscriberId, key, { 'x-api-key': apiKey });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('the same body with its keys in another order and other whitespace is the same request', async () => {
    const key = unique('order');
    const url = '/org/features';
    const headers = { ...org.headers, 'idempotency-key': key, 'content-type': 'application/json' };
    const featureKey = unique('f');
    const first = await ctx.app.inject({
      method: 'POST',
      url,
      headers,
      payload: `{"key":"${featureKey}","name":"F","kind":"flag"}`,
    });
    expect(first.statusCode).toBe(201);
    const repeat = await ctx.app.inject({
      method: 'POST',
      url,
      headers,
      payload: `{ "kind": "flag", "name": "F",\n "key": "${featureKey}" }`,
    });
    expect(repeat.statusCode).toBe(201);
    expect(repeat.headers['idempotent-replayed']).toBe('true');
    expect(repeat.body).toBe(first.body);
  });

  it('an error answer is not stored: the same key runs again once the cause is gone', async () => {
    const key = unique('error');
    const subscriberId = unique('later');
    const patch = () =>
      ctx.app.inject({
        method: 'PATCH',
        url: `/org/subscribers/${subscriberId}`,
        headers: { ...org.headers, 'idempotency-key': key },
        payload: { name: 'Later' },
      });
    expect((await patch()).statusCode).toBe(404);
    expect(await storedKey(key)).toBeUndefined();
    expect((await createSubscriber(subscriberId, undefined)).statusCode).toBe(201);
    const res = await patch();
    expect(res.statusCode).toBe(200);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('a validation error is not stored either', async () => {
    const key = unique('invalid-body');
    const bad = await ctx.app.inject({
      method: 'POST',
      url: '/org/subscribers',
      headers: { ...org.headers, 'idempotency-key': key },
      payload: { subscriber_id: '' },
    });
    expect(bad.statusCode).toBe(422);
    expect(await storedKey(key)).toBeUndefined();
    expect((await createSubscriber(unique('fixed'), key)).statusCode).toBe(201);
  });

  it('an expired key counts as unused: the request runs and takes the key over', async () => {
    const key = unique('expired');
    await ctx.ownerDb
      .insertInto('idempotency_keys')
      .values({
        organization_id: org.organization_id,
        key,
        fingerprint: 'an older request',
        response_status: 201,
        response_content_type: 'application/json',
        response_body: '{}',
        created_at: new Date(Date.now() - 25 * 3600_000),
        expires_at: new Date(Date.now() - 3600_000),
      })
      .execute();
    const subscriberId = unique('fresh');
    const res = await createSubscriber(subscriberId, key);
    expect(res.statusCode).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect((await storedKey(key))?.response_body).toBe(res.body);
  });

  it('expired keys are pruned in bounded batches by later keyed writes', async () => {
    await insertExpired(Array.from({ length: 150 }, (_, i) => unique(`old-${i}`)));
    const remaining = async () =>
      Number(
        (
          await ctx.ownerDb
            .selectFrom('idempotency_keys')
            .select((eb) => eb.fn.countAll<string>().as('n'))
            .where('expires_at', '<=', new Date())
            .executeTakeFirstOrThrow()
        ).n,
      );
    // Earlier keyed writes found nothing expired: the next prune is due once the idle wait is over (counted from the
    // end of the last prune, which may still be in flight).
    await ctx.app.idempotencyPruner.settled();
    clockSkewMs += 11_000;
    // The prune runs after the response has left: each keyed write's is waited for, then it is counted.
    expect((await createSubscriber(unique('prune'), unique('prune'))).statusCode).toBe(201);
    await vi.waitFor(async () => expect(await remaining()).toBeLessThan(150), { timeout: 5_000 });
    expect(await remaining()).toBe(50);
    await ctx.app.idempotencyPruner.settled();
    // The batch was full: the next keyed write prunes again at once.
    expect((await createSubscriber(unique('prune'), unique('prune'))).statusCode).toBe(201);
    await vi.waitFor(async () => expect(await remaining()).toBe(0), { timeout: 5_000 });
  });

  it('after a prune that found less than a batch, the next waits ten seconds: not one lookup per write', async () => {
    const first = unique('expired-first');
    await insertExpired([first]);
    await ctx.app.idempotencyPruner.settled();
    clockSkewMs += 11_000;
    expect((await createSubscriber(unique('idle'), unique('idle'))).statusCode).toBe(201);
    await vi.waitFor(async () => expect(await storedKey(first)).toBeUndefined(), { timeout: 5_000 });
    await ctx.app.idempotencyPruner.settled();
    // That prune deleted one row, less than a batch: a keyed write within the next 10 s prunes nothing.
    const second = unique('expired-second');
    await insertExpired([second]);
    expect((await createSubscriber(unique('idle'), unique('idle'))).statusCode).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await storedKey(second)).toBeDefined();
    clockSkewMs += 11_000;
    expect((await createSubscriber(unique('idle'), unique('idle'))).statusCode).toBe(201);
    await vi.waitFor(async () => expect(await storedKey(second)).toBeUndefined(), { timeout: 5_000 });
  });
});

describe('a repeat while the first is still running', () => {
  it('gets 409 while another transaction holds the key', async () => {
    const key = unique('held');
    const subscriberId = unique('held');
    await ctx.ownerDb.transaction().execute(async (trx) => {
      // What the first request's transaction holds from its reservation until it commits.
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${org.organization_id} || '/' || ${key}, 0))`.execute(
        trx,
      );
      const res = await createSubscriber(subscriberId, key);
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'Idempotency-Key' } });
    });
    expect(await subscriberCount(subscriberId)).toBe(0);
  });

  it('gets 409 after the first committed and before its response was recorded', async () => {
    const key = unique('unrecorded');
    await ctx.ownerDb
      .insertInto('idempotency_keys')
      .values({
        organization_id: org.organization_id,
        key,
        fingerprint: 'the first request',
        created_at: new Date(),
        expires_at: new Date(Date.now() + 3600_000),
      })
      .execute();
    const res = await createSubscriber(unique('second'), key);
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('CONFLICT');
  });

  it('two simultaneous requests with one key make one write: the other gets 409 or the replay', async () => {
    for (let round = 0; round < 5; round++) {
      const key = unique('race');
      const subscriberId = unique('race');
      const answers = await Promise.all([
        createSubscriber(subscriberId, key),
        createSubscriber(subscriberId, key),
      ]);
      expect(await subscriberCount(subscriberId)).toBe(1);
      const made = answers.filter(
        (res) => res.statusCode === 201 && res.headers['idempotent-replayed'] !== 'true',
      );
      expect(made).toHaveLength(1);
      const other = answers.find((res) => res !== made[0])!;
      if (other.statusCode === 409)
        expect(other.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'Idempotency-Key' } });
      else {
        expect(other.statusCode).toBe(201);
        expect(other.headers['idempotent-replayed']).toBe('true');
        expect(other.body).toBe(made[0]!.body);
      }
    }
  });
});

describe('the response is kept in the write’s own transaction', () => {
  type Row = {
    response_status: number | null;
    response_body: string | null;
    response_content_type: string | null;
  };
  const seen = new Map<string, { inTransaction?: Row; committedBeforeSend?: Row }>();
  const rowIn = (db: Pick<typeof ctx.ownerDb, 'selectFrom'>, key: string) =>
    db
      .selectFrom('idempotency_keys')
      .select(['response_status', 'response_body', 'response_content_type'])
      .where('organization_id', '=', org.organization_id)
      .where('key', '=', key)
      .executeTakeFirst();

  beforeAll(() => {
    // Registered after the idempotency plugin's: they run after its listeners, last before COMMIT and first
    // after it, which is where a process killed between the two would have left the row.
    ctx.app.writePipeline.onAnswer(async (trx, request) => {
      const key = request.idempotency?.key;
      if (key && seen.has(key)) seen.get(key)!.inTransaction = await rowIn(trx, key);
    });
    ctx.app.writePipeline.onCommitted(async (request) => {
      const key = request.idempotency?.key;
      if (key && seen.has(key)) seen.get(key)!.committedBeforeSend = await rowIn(ctx.ownerDb, key);
    });
  });

  it('holds the status, content type and body before COMMIT, and the committed row holds them before the send', async () => {
    const key = unique('in-trx');
    seen.set(key, {});
    const res = await createSubscriber(unique('in-trx'), key);
    expect(res.statusCode).toBe(201);
    const expected = {
      response_status: 201,
      response_body: res.body,
      response_content_type: 'application/json; charset=utf-8',
    };
    expect(res.headers['content-type']).toBe(expected.response_content_type);
    expect(seen.get(key)).toEqual({ inTransaction: expected, committedBeforeSend: expected });
  });

  it('a 204 is kept without a body, and replayed as one', async () => {
    const subscriberId = unique('to-delete');
    expect((await createSubscriber(subscriberId, undefined)).statusCode).toBe(201);
    const feature = `f-${subscriberId}`;
    expect(
      (
        await ctx.app.inject({
          method: 'POST',
          url: '/org/features',
          headers: org.headers,
          payload: { key: feature, name: 'F', kind: 'flag' },
        })
      ).statusCode,
    ).toBe(201);
    const url = `/org/subscribers/${subscriberId}/overrides/${feature}`;
    const put = await ctx.app.inject({
      method: 'PUT',
      url,
      headers: org.headers,
      payload: { kind: 'flag', allowed: true },
    });
    expect(put.statusCode).toBe(200);
    const key = unique('delete');
    seen.set(key, {});
    const remove = () =>
      ctx.app.inject({ method: 'DELETE', url, headers: { ...org.headers, 'idempotency-key': key } });
    const first = await remove();
    expect(first.statusCode).toBe(204);
    const empty = { response_status: 204, response_body: '', response_content_type: null };
    expect(seen.get(key)).toEqual({ inTransaction: empty, committedBeforeSend: empty });
    const again = await remove();
    expect(again.statusCode).toBe(204);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe('');
  });

  it('a write refused by its rules keeps no key: the reservation rolls back with it', async () => {
    const subscriberId = unique('taken');
    expect((await createSubscriber(subscriberId, undefined)).statusCode).toBe(201);
    const key = unique('refused');
    seen.set(key, {});
    expect((await createSubscriber(subscriberId, key)).statusCode).toBe(409);
    expect(seen.get(key)).toEqual({});
    expect(await storedKey(key)).toBeUndefined();
  });
});
