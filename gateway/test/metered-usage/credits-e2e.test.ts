import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@ent/common/clock';
import { saveArrangement } from '@ent/common/metering/arrangement';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { catalogClient, gatewayOverAdmin, injector } from '../helpers.ts';
import type { GatewayApp } from '../../src/app.ts';

/**
 * Credits end to end in one process (issue 35): a credit added through the API is spent by the next consume on
 * either gateway (read-your-writes), after the allowance and in the documented order, until its expiry instant on the
 * app clock; a voided credit keeps what it spent and counts no more.
 */
// The snapshot builder leaves out credits expired by the database's clock: the app clock starts at the real time.
const START = Date.now();
const HOUR = 3_600_000;
const clock = new ManualClock(START);
let ctx: AdminTestContext;
const gateways: GatewayApp[] = [];
let org: TestOrganization;

beforeAll(async () => {
  ctx = await createAdminContext({ clock });
  gateways.push(await gatewayOverAdmin(ctx, { clock }), await gatewayOverAdmin(ctx, { clock }));
  org = await createTestOrganization(ctx.db, 'Credits');
  await saveArrangement(ctx.db, org.organization_id, {
    plan: null,
    evalLimit: null,
    blocking: false,
    burstPerSecond: 100_000,
  });
}, 60_000);

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  await ctx?.close();
});

describe('credits through the API', () => {
  it('a new credit is spent after the allowance on either gateway, until it expires or is voided', async () => {
    const [a, b] = gateways.map(injector) as [ReturnType<typeof injector>, ReturnType<typeof injector>];
    const api = catalogClient(a, org.headers);
    await api.meteredSubscriber('ann', 'calls', 'monthly', 5);
    const consume = (call: typeof a, n: number) =>
      call({
        method: 'POST',
        url: '/org/subscribers/ann/entitlements/check',
        headers: org.headers,
        payload: n === 0 ? { feature: 'calls' } : { feature: 'calls', consume: n },
      }).then((res) => res.json());

    expect(await consume(a, 5)).toMatchObject({ allowed: true, used: 5, remaining: 0, credits: [] });
    expect(await consume(b, 1)).toMatchObject({ allowed: false, used: 5 });

    const promo = (
      await api.send(
        'POST',
        '/org/subscribers/ann/credits',
        { feature: 'calls', amount: 3, priority: 1, expires_at: new Date(START + HOUR).toISOString() },
        201,
      )
    ).json().credit_id as string;
    const topUp = (
      await api.send('POST', '/org/subscribers/ann/credits', { feature: 'calls', amount: 10 }, 201)
    ).json().credit_id as string;

    // Read-your-writes on the other gateway: the promotion (priority 1) is spent first.
    const spent = await consume(b, 4);
    expect(spent).toMatchObject({ allowed: true, used: 9, remaining: 9 });
    expect(spent.credits).toEqual([{ credit_id: topUp, remaining: 9, expires_at: null }]);

    clock.set(START + HOUR - 1);
    expect((await consume(a, 0)).credits.map((c: { credit_id: string }) => c.credit_id)).toEqual([topUp]);

    await api.send('DELETE', `/org/subscribers/ann/credits/${topUp}`, undefined, 200);
    expect(await consume(a, 1)).toMatchObject({ allowed: false, used: 9, remaining: 0, credits: [] });
    const listed = (await api.send('GET', '/org/subscribers/ann/credits', undefined, 200)).json().credits as {
      credit_id: string;
      spent: number;
      status: string;
    }[];
    expect(listed.find((credit) => credit.credit_id === topUp)).toMatchObject({ spent: 1, status: 'voided' });
    expect(listed.find((credit) => credit.credit_id === promo)).toMatchObject({ spent: 3 });
  });
});

describe('a consume of the allowance while credits are live', () => {
  it('lists every credit whole on either gateway, and so does the replay of a keyed one', async () => {
    // The script answers such a consume with the integer used (every credit figure 0): the answer must still list
    // the credits, and a replay must list them too (the record keeps the figures' text, for every gateway version).
    const [a, b] = gateways.map(injector) as [ReturnType<typeof injector>, ReturnType<typeof injector>];
    const api = catalogClient(a, org.headers);
    await api.meteredSubscriber('bo', 'mails', 'mailer', 5);
    const first = (
      await api.send('POST', '/org/subscribers/bo/credits', { feature: 'mails', amount: 3, priority: 1 }, 201)
    ).json().credit_id as string;
    const second = (
      await api.send('POST', '/org/subscribers/bo/credits', { feature: 'mails', amount: 7 }, 201)
    ).json().credit_id as string;
    const whole = [
      { credit_id: first, remaining: 3, expires_at: null },
      { credit_id: second, remaining: 7, expires_at: null },
    ];
    const consume = (call: typeof a, n: number, key?: string) =>
      call({
        method: 'POST',
        url: '/org/subscribers/bo/entitlements/check',
        headers: key === undefined ? org.headers : { ...org.headers, 'idempotency-key': key },
        payload: { feature: 'mails', consume: n },
      });

    const plain = (await consume(a, 1)).json();
    expect(plain).toMatchObject({ allowed: true, used: 1, remaining: 14 });
    expect(plain.credits).toEqual(whole);

    const keyed = await consume(b, 2, 'bo-mails-2');
    expect(keyed.json()).toMatchObject({ allowed: true, used: 3, remaining: 12 });
    expect(keyed.json().credits).toEqual(whole);
    const replayed = await consume(a, 2, 'bo-mails-2');
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.json()).toEqual(keyed.json());

    // Past the allowance the figures come back as text: the first credit gives 1.
    const past = (await consume(b, 3)).json();
    expect(past).toMatchObject({ allowed: true, used: 6, remaining: 9 });
    expect(past.credits).toEqual([{ ...whole[0], remaining: 2 }, whole[1]]);
  });
});
