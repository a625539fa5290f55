import { describe, expect, it } from 'vitest';
import { newId } from '@ent/common/ids';
import { planSuite } from './fixtures.ts';

const suite = planSuite();

describe('DELETE /org/plans/{key}', () => {
  it('deletes an unreferenced plan with 204', async () => {
    const { inject, createPlan, catalogVersion, lastWrite, planId, ctx } = await suite.world();
    await createPlan({
      key: 'doomed',
      name: 'Doomed',
      kind: 'custom',
      grants: [{ feature: 'sso', kind: 'flag' }],
    });
    const id = await planId('doomed');
    const version = await catalogVersion();
    const res = await inject('DELETE', '/org/plans/doomed');
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(lastWrite()).toMatchObject({
      details: null,
      catalogChanged: true,
      events: [{ type: 'plan.deleted', data: { key: 'doomed', grants: [{ feature: 'sso', kind: 'flag' }] } }],
    });
    expect(await catalogVersion()).toBe(version + 1);
    expect((await inject('GET', '/org/plans/doomed')).statusCode).toBe(404);
    expect((await inject('DELETE', '/org/plans/doomed')).statusCode).toBe(404);
    // Its grants went with it.
    expect(await ctx.db.selectFrom('plan_grants').selectAll().where('plan_id', '=', id).execute()).toEqual(
      [],
    );
    const again = await createPlan({ key: 'doomed', name: 'Reborn', kind: 'catalog' });
    expect(again.statusCode).toBe(201);
  });

  it.each(['active', 'canceled'] as const)(
    'refuses with 409 CONFLICT while a %s subscription references the plan',
    async (status) => {
      const { inject, createPlan, catalogVersion, subscribe } = await suite.world();
      const key = `held-${status}`;
      await createPlan({
        key,
        name: 'Held',
        kind: 'catalog',
        grants: [{ feature: 'seats', kind: 'limit', limit: 3 }],
      });
      await subscribe(key, status);
      const version = await catalogVersion();
      const res = await inject('DELETE', `/org/plans/${key}`);
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'CONFLICT', details: { field: 'key', value: key } });
      expect((await inject('GET', `/org/plans/${key}`)).json()).toMatchObject({
        key,
        grants: [{ feature: 'seats', limit: 3 }],
      });
      expect(await catalogVersion()).toBe(version);
    },
  );

  it('answers 409, not 500, when a subscription is created while the delete runs', async () => {
    const { inject, createPlan, planId, org, ctx } = await suite.world();
    await createPlan({ key: 'racing', name: 'Racing', kind: 'catalog' });
    const id = await planId('racing');
    await ctx.db
      .insertInto('subscribers')
      .values({ organization_id: org.organization_id, subscriber_id: 'cust-racing', name: null })
      .execute();
    let pending: ReturnType<typeof inject> | undefined;
    await ctx.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('subscriptions')
        .values({
          id: newId('sub'),
          organization_id: org.organization_id,
          subscriber_id: 'cust-racing',
          plan_id: id,
        })
        .execute();
      pending = inject('DELETE', '/org/plans/racing');
      await new Promise((resolve) => setTimeout(resolve, 150));
    });
    const res = await pending!;
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('CONFLICT');
    expect((await inject('GET', '/org/plans/racing')).statusCode).toBe(200);
  });
});
