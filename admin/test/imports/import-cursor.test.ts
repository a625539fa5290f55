import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import { ndjson, refusals, runImport } from './run-import.ts';

/**
 * The runner reads a batch as the span of line numbers after its cursor: a span holding only lines refused while
 * staging, or blank ones, moves the cursor past it and the lines after it are still applied.
 */
let ctx: AdminTestContext;

beforeAll(async () => {
  ctx = await createAdminContext({ imports: { runner: { batchSize: 3 } } });
});
afterAll(() => ctx.close());

describe('the import cursor', () => {
  it('moves past spans with nothing to apply, to the lines after them', async () => {
    const org = await createTestOrganization(ctx.db);
    const done = await runImport(
      ctx,
      org,
      ndjson(['{', '{', '', '', '{', '{', '', { type: 'subscriber', subscriber_id: 'last' }]),
    );
    expect(done).toMatchObject({ status: 'succeeded', lines: 5, applied: 1, failed: 4 });
    expect(refusals(done).map(([line]) => line)).toEqual([1, 2, 5, 6]);
    const got = await ctx.app.inject({ method: 'GET', url: '/org/subscribers/last', headers: org.headers });
    expect(got.statusCode).toBe(200);
  });
});
