import { describe, expect, it } from 'vitest';
import type { GrantBody } from '@ent/contract/plans';
import { planSuite } from './fixtures.ts';

const suite = planSuite();
const keys = (body: { plans: { key: string }[] }) => body.plans.map((p) => p.key);

describe('GET /org/plans and /org/plans/{key}', () => {
  it('reads one plan by key', async () => {
    const { inject } = await suite.world({ plans: true });
    const res = await inject('GET', '/org/plans/pro');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      key: 'pro',
      archived: false,
      grants: [{ feature: 'api-calls' }, { feature: 'seats' }, { feature: 'sso' }],
    });
  });

  it('answers 404 NOT_FOUND for an unknown key', async () => {
    const { inject } = await suite.world();
    const res = await inject('GET', '/org/plans/nope');
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
  });

  it('lists plans ordered by key, with their grants', async () => {
    const { inject } = await suite.world({ plans: true });
    const res = await inject('GET', '/org/plans');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(keys(body)).toEqual(['acme_custom', 'free', 'pro']);
    expect(body.has_more).toBe(false);
    expect(body.plans[2].grants.map((g: GrantBody) => g.feature)).toEqual(['api-calls', 'seats', 'sso']);
    expect(body.plans[0].grants).toEqual([{ feature: 'seats', kind: 'limit', limit: 0 }]);
  });

  it('filters by ?kind=', async () => {
    const { inject } = await suite.world({ plans: true });
    expect(keys((await inject('GET', '/org/plans?kind=custom')).json())).toEqual(['acme_custom']);
    expect(keys((await inject('GET', '/org/plans?kind=catalog')).json())).toEqual(['free', 'pro']);
    expect((await inject('GET', '/org/plans?kind=other')).statusCode).toBe(422);
  });

  it('pages with limit and starting_after', async () => {
    const { inject } = await suite.world({ plans: true });
    const first = await inject('GET', '/org/plans?limit=2');
    expect(keys(first.json())).toEqual(['acme_custom', 'free']);
    expect(first.json().has_more).toBe(true);
    const next = await inject('GET', '/org/plans?limit=2&starting_after=free');
    expect(next.json()).toMatchObject({ plans: [{ key: 'pro', grants: [{}, {}, {}] }], has_more: false });
    const filtered = await inject('GET', '/org/plans?kind=catalog&limit=1&starting_after=free');
    expect(filtered.json()).toMatchObject({ plans: [{ key: 'pro' }], has_more: false });
  });

  it.each(['nope', 'zzz', '0'])(
    'refuses starting_after=%s, which names no plan, with 422',
    async (cursor) => {
      const { inject } = await suite.world({ plans: true });
      const res = await inject('GET', `/org/plans?starting_after=${cursor}`);
      expect(res.statusCode).toBe(422);
      expect(res.json().error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: { field: 'starting_after', value: cursor },
      });
    },
  );

  it.each(['/org/plans?limit=0', '/org/plans?limit=101', '/org/plans?colour=blue', '/org/plans/pro?x=1'])(
    'refuses %s with 422',
    async (url) => {
      const { inject } = await suite.world({ plans: true });
      expect((await inject('GET', url)).statusCode).toBe(422);
    },
  );
});
