import { expect } from 'vitest';
import type { AdminTestContext, TestOrganization } from '../../../test-support/admin-context.ts';

export const ndjson = (records: unknown[]) =>
  records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';

/** Posts an NDJSON body, waits for the runner and answers the finished import. */
export async function runImport(ctx: AdminTestContext, org: TestOrganization, body: string, query = '') {
  const res = await ctx.app.inject({
    method: 'POST',
    url: `/org/imports${query}`,
    headers: { ...org.headers, 'content-type': 'application/x-ndjson' },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(202);
  await ctx.app.imports.runner.idle();
  const got = await ctx.app.inject({
    method: 'GET',
    url: `/org/imports/${res.json().import_id}`,
    headers: org.headers,
  });
  expect(got.statusCode).toBe(200);
  return got.json();
}

/** [line, code, field] of each refused line. */
export const refusals = (done: {
  errors: { line: number; error: { code: string; details?: { field?: string } } }[];
}) => done.errors.map((e) => [e.line, e.error.code, e.error.details?.field]);
