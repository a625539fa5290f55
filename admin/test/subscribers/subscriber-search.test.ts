import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext();
});
afterAll(() => ctx.close());

/** An organization of its own with these subscribers (id, name). */
async function organizationWith(subscribers: [id: string, name: string | null][]): Promise<TestOrganization> {
  const org = await createTestOrganization(ctx.db, 'Search org');
  for (const [subscriber_id, name] of subscribers) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/org/subscribers',
      headers: org.headers,
      payload: { subscriber_id, name },
    });
    expect(res.statusCode).toBe(201);
  }
  return org;
}

const search = (org: TestOrganization, query: string, headers = org.headers) =>
  ctx.app.inject({ method: 'GET', url: `/org/subscribers?${query}`, headers });
const idsOf = async (org: TestOrganization, query: string) => {
  const res = await search(org, query);
  expect(res.statusCode).toBe(200);
  return (res.json().subscribers as { subscriber_id: string }[]).map((s) => s.subscriber_id);
};
const q = (text: string) => `search=${encodeURIComponent(text)}`;

const PEOPLE: [string, string | null][] = [
  ['cus_alpha', 'Globex Corporation'],
  ['cus_beta', 'Initech'],
  ['CUS_Gamma', 'Umbrella'],
  ['acct-7', 'The Alpha Group'],
  ['acct-8', null],
  ['x9', 'beta testers'],
];

describe('GET /org/subscribers?search=', () => {
  it('finds subscribers whose id starts with the text or whose name contains it, ignoring case', async () => {
    const org = await organizationWith(PEOPLE);
    expect(await idsOf(org, q('cus_'))).toEqual(['CUS_Gamma', 'cus_alpha', 'cus_beta']);
    expect(await idsOf(org, q('ALPHA'))).toEqual(['acct-7']);
    expect(await idsOf(org, q('cus_ALPHA'))).toEqual(['cus_alpha']);
    expect(await idsOf(org, q('beta'))).toEqual(['x9']);
    expect(await idsOf(org, q('acct'))).toEqual(['acct-7', 'acct-8']);
    // Inside an id is not a prefix: only names match anywhere.
    expect(await idsOf(org, q('lpha'))).toEqual(['acct-7']);
    expect(await idsOf(org, q('corp'))).toEqual(['cus_alpha']);
    expect(await idsOf(org, q('nobody'))).toEqual([]);
  });

  it('matches %, _ and \\ literally', async () => {
    const org = await organizationWith([
      ['a_b', '100% sure'],
      ['axb', 'one_two'],
      ['c', 'back\\slash'],
      ['d', 'plain'],
    ]);
    expect(await idsOf(org, q('a_'))).toEqual(['a_b']);
    expect(await idsOf(org, q('%'))).toEqual(['a_b']);
    expect(await idsOf(org, q('_'))).toEqual(['axb']);
    expect(await idsOf(org, q('\\'))).toEqual(['c']);
  });

  it('pages the matches with limit and starting_after', async () => {
    const org = await organizationWith([
      ['m-1', null],
      ['m-2', null],
      ['n-1', 'has m- in the name'],
      ['m-3', null],
      ['z', 'nothing'],
    ]);
    const first = (await search(org, `${q('m-')}&limit=2`)).json();
    expect(first.subscribers.map((s: { subscriber_id: string }) => s.subscriber_id)).toEqual(['m-1', 'm-2']);
    expect(first.has_more).toBe(true);
    const second = (await search(org, `${q('m-')}&limit=2&starting_after=m-2`)).json();
    expect(second.subscribers.map((s: { subscriber_id: string }) => s.subscriber_id)).toEqual(['m-3', 'n-1']);
    expect(second.has_more).toBe(false);
    // The cursor is checked as on the plain list: a subscriber of this organization.
    expect((await search(org, `${q('m-')}&starting_after=nope`)).statusCode).toBe(422);
  });

  it("searches only the calling organization's subscribers", async () => {
    const mine = await organizationWith([['shared-1', 'Mine']]);
    await organizationWith([['shared-2', 'Theirs']]);
    expect(await idsOf(mine, q('shared'))).toEqual(['shared-1']);
    expect(await idsOf(mine, q('theirs'))).toEqual([]);
  });

  it.each([
    ['empty', 'search='],
    ['over 200 characters', q('a'.repeat(201))],
    ['a NUL character', 'search=a%00b'],
  ])('refuses a search that is %s with 422', async (_what, query) => {
    const org = await organizationWith([]);
    const res = await search(org, query);
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'search' } });
  });

  it('accepts 200 characters, and needs subscribers:read', async () => {
    const org = await organizationWith([['long', null]]);
    expect(await idsOf(org, q('l'.repeat(200)))).toEqual([]);
    const catalogOnly = await createKeyWithScopes(ctx.db, org.organization_id, ['catalog:read']);
    expect((await search(org, q('long'), { 'x-api-key': catalogOnly.apiKey })).statusCode).toBe(403);
  });
});
