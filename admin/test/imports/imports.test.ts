import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { redisKeys } from '@ent/common/redis/keys';
import { snapshotStore } from '@ent/common/snapshots/store';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';

let ctx: AdminTestContext;

const MAX_BYTES = 64 * 1024;

beforeAll(async () => {
  // Batches of 3 lines: every test crosses batch boundaries.
  ctx = await createAdminContext({ imports: { runner: { batchSize: 3 }, maxBytes: MAX_BYTES } });
});
afterAll(() => ctx.close());

/** The organization's imports' ids, with that status when given ('receiving': an upload still staging). */
async function importIdsOf(org: TestOrganization, status?: 'receiving'): Promise<string[]> {
  const rows = await ctx.db
    .selectFrom('imports')
    .select('id')
    .where('organization_id', '=', org.organization_id)
    .$if(status !== undefined, (query) => query.where('status', '=', status!))
    .execute();
  return rows.map((row) => row.id);
}

const ndjson = (records: unknown[]) =>
  records.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n';

function post(
  org: TestOrganization,
  body: string,
  { query = '', headers = {} as Record<string, string> } = {},
) {
  return ctx.app.inject({
    method: 'POST',
    url: `/org/imports${query}`,
    headers: { ...org.headers, 'content-type': 'application/x-ndjson', ...headers },
    payload: body,
  });
}

/** Posts, waits for the runner and answers the finished import. */
async function runImport(org: TestOrganization, body: string, options: Parameters<typeof post>[2] = {}) {
  const res = await post(org, body, options);
  expect(res.statusCode, res.body).toBe(202);
  const { import_id } = res.json();
  expect(res.headers.location).toBe(`/org/imports/${import_id}`);
  await ctx.app.imports.runner.idle();
  const got = await ctx.app.inject({ method: 'GET', url: `/org/imports/${import_id}`, headers: org.headers });
  expect(got.statusCode).toBe(200);
  return got.json();
}

const CATALOG = [
  { type: 'feature', key: 'seats', name: 'Seats', kind: 'limit' },
  { type: 'feature', key: 'sso', name: 'SSO', kind: 'flag', description: 'single sign-on' },
  {
    type: 'plan',
    key: 'pro',
    name: 'Pro',
    kind: 'catalog',
    grants: [
      { feature: 'sso', kind: 'flag' },
      { feature: 'seats', kind: 'limit', limit: 10 },
    ],
  },
];

const people = (n: number) =>
  Array.from({ length: n }, (_, i) => [
    { type: 'subscriber', subscriber_id: `cus_${i}`, name: `Customer ${i}` },
    { type: 'subscription', subscriber_id: `cus_${i}`, plan_id: 'pro' },
  ]).flat();

describe('POST /org/imports', () => {
  it('upserts every record type by natural key, publishes them, and reports each line', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson([
      ...CATALOG,
      ...people(4),
      { type: 'override', subscriber_id: 'cus_0', feature_key: 'seats', kind: 'limit', limit: 50 },
    ]);
    const done = await runImport(org, body);
    expect(done).toMatchObject({
      status: 'succeeded',
      dry_run: false,
      lines: 12,
      applied: 12,
      unchanged: 0,
      failed: 0,
      errors: [],
      sha256: createHash('sha256').update(body).digest('hex'),
    });
    expect(done.finished_at).not.toBeNull();

    const subscriptions = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers/cus_3/subscriptions',
      headers: org.headers,
    });
    expect(subscriptions.json().subscriptions.map((s: { plan_id: string }) => s.plan_id)).toEqual(['pro']);
    // Published before `succeeded`: what a gateway reads is already there.
    const store = snapshotStore(ctx.redis, redisKeys(ctx.config.redisKeyPrefix));
    const snapshot = await store.readSubscriber(org.organization_id, 'cus_0');
    expect(snapshot?.doc.plans).toHaveLength(1);
    expect(Object.keys(snapshot?.doc.overrides ?? {})).toEqual(['seats']);
    expect((await store.readCatalog(org.organization_id))?.doc).toBeTruthy();

    // The same body again changes nothing.
    const again = await runImport(org, body);
    expect(again).toMatchObject({ status: 'succeeded', applied: 0, unchanged: 12, failed: 0 });

    // A changed name is applied; the rest stays unchanged.
    const renamed = await runImport(
      org,
      ndjson([{ type: 'subscriber', subscriber_id: 'cus_1', name: 'Renamed' }, ...people(2)]),
    );
    expect(renamed).toMatchObject({ applied: 2, unchanged: 3 });
    const cus1 = await ctx.app.inject({ method: 'GET', url: '/org/subscribers/cus_1', headers: org.headers });
    expect(cus1.json().name).toBe('Customer 1');
  });

  it('refuses bad lines alone, with their single route error codes and line numbers, and applies the rest', async () => {
    const org = await createTestOrganization(ctx.db);
    await runImport(org, ndjson(CATALOG));
    const done = await runImport(
      org,
      ndjson([
        { type: 'subscriber', subscriber_id: 'ok_1' },
        '{"type": "subscriber", ',
        { type: 'gizmo', id: 1 },
        { type: 'subscription', subscriber_id: 'ok_1', plan_id: 'nope' },
        { type: 'subscription', subscriber_id: 'ghost', plan_id: 'pro' },
        { type: 'subscriber', subscriber_id: 'ok_2', extra: true },
        { type: 'credit', subscriber_id: 'ok_1', amount: 5 },
        '',
        { type: 'subscription', subscriber_id: 'ok_1', plan_id: 'pro' },
        { type: 'feature', key: 'seats', name: 'Seats', kind: 'flag' },
      ]),
    );
    expect(done).toMatchObject({ status: 'succeeded', lines: 9, applied: 2, unchanged: 0, failed: 7 });
    const codes = done.errors.map(
      (e: { line: number; error: { code: string; details: { field?: string } } }) => [
        e.line,
        e.error.code,
        e.error.details.field,
      ],
    );
    expect(codes).toEqual([
      [2, 'VALIDATION_ERROR', 'line'],
      [3, 'VALIDATION_ERROR', 'type'],
      [4, 'VALIDATION_ERROR', 'plan_id'],
      [5, 'NOT_FOUND', 'subscriber_id'],
      [6, 'VALIDATION_ERROR', 'extra'],
      [7, 'VALIDATION_ERROR', 'credit_id'],
      [10, 'VALIDATION_ERROR', 'kind'],
    ]);
    const failedLines = await ctx.app.inject({
      method: 'GET',
      url: `/org/imports/${done.import_id}/lines?result=failed&limit=2&starting_after=3`,
      headers: org.headers,
    });
    expect(failedLines.statusCode).toBe(200);
    expect(failedLines.json().lines.map((l: { line: number }) => l.line)).toEqual([4, 5]);
    expect(failedLines.json().has_more).toBe(true);
    expect(failedLines.json().lines[1]).toMatchObject({
      type: 'subscription',
      key: 'ghost/pro',
      result: 'failed',
    });
    const all = await ctx.app.inject({
      method: 'GET',
      url: `/org/imports/${done.import_id}/lines?limit=100`,
      headers: org.headers,
    });
    expect(
      all
        .json()
        .lines.filter((l: { result: string }) => l.result === 'applied')
        .map((l: { line: number }) => l.line),
    ).toEqual([1, 9]);
    // Applied lines are not rewritten with their result (the cursor says it): the filter still finds them.
    const applied = await ctx.app.inject({
      method: 'GET',
      url: `/org/imports/${done.import_id}/lines?result=applied`,
      headers: org.headers,
    });
    expect(applied.json().lines.map((l: { line: number; result: string }) => [l.line, l.result])).toEqual([
      [1, 'applied'],
      [9, 'applied'],
    ]);
  });

  it('reads text as its single route does: a byte order mark, half a surrogate pair, an escaped backslash before u0000', async () => {
    const org = await createTestOrganization(ctx.db);
    const done = await runImport(
      org,
      '\uFEFF' +
        [
          JSON.stringify({ type: 'subscriber', subscriber_id: 'bom_1', name: 'First' }),
          '{"type":"subscriber","subscriber_id":"half_1","name":"x\\ud800y"}',
          '{"type":"subscriber","subscriber_id":"path_1","name":"C:\\\\u0000\\\\temp"}',
          '{"type":"subscriber","subscriber_id":"nul_1","name":"a\\u0000b"}',
          // A NUL where the refused line's own key or type is staged from: that line alone is refused.
          '{"type":"subscriber","subscriber_id":"nul\\u0000key"}',
          '{"type":"sub\\u0000scriber","subscriber_id":"nul_2"}',
        ].join('\n'),
    );
    expect(done).toMatchObject({ status: 'succeeded', lines: 6, applied: 3, failed: 3 });
    expect(done.errors).toMatchObject([
      { line: 4, error: { code: 'VALIDATION_ERROR', details: { field: 'name', location: 'line' } } },
      { line: 5, error: { code: 'VALIDATION_ERROR', details: { field: 'subscriber_id', location: 'line' } } },
      { line: 6, error: { code: 'VALIDATION_ERROR', details: { field: 'type', location: 'line' } } },
    ]);
    const nameOf = async (id: string) =>
      (await ctx.app.inject({ method: 'GET', url: `/org/subscribers/${id}`, headers: org.headers })).json()
        .name;
    expect(await nameOf('bom_1')).toBe('First');
    // Stored as the single route stores it: the lone half becomes U+FFFD.
    expect(await nameOf('half_1')).toBe('x\uFFFDy');
    expect(await nameOf('path_1')).toBe('C:\\u0000\\temp');
  });

  it("keeps a subscriber's name that a later line leaves out, within a batch as across batches", async () => {
    const org = await createTestOrganization(ctx.db);
    // Batches of 3: dup_a's two lines share one, dup_b's are two batches apart.
    const done = await runImport(
      org,
      ndjson([
        { type: 'subscriber', subscriber_id: 'dup_a', name: 'Alpha' },
        { type: 'subscriber', subscriber_id: 'dup_a' },
        { type: 'subscriber', subscriber_id: 'dup_b', name: 'Beta' },
        { type: 'subscriber', subscriber_id: 'other_1' },
        { type: 'subscriber', subscriber_id: 'other_2' },
        { type: 'subscriber', subscriber_id: 'other_3' },
        { type: 'subscriber', subscriber_id: 'dup_b' },
        { type: 'subscriber', subscriber_id: 'dup_a', name: 'Alpha 2' },
        { type: 'subscriber', subscriber_id: 'dup_a', name: null },
      ]),
    );
    expect(done).toMatchObject({ status: 'succeeded', failed: 0 });
    const nameOf = async (id: string) =>
      (await ctx.app.inject({ method: 'GET', url: `/org/subscribers/${id}`, headers: org.headers })).json()
        .name;
    expect(await nameOf('dup_b')).toBe('Beta');
    // The last line that names it decides, null included.
    expect(await nameOf('dup_a')).toBeNull();
    const first = await runImport(
      org,
      ndjson([
        { type: 'subscriber', subscriber_id: 'dup_c', name: 'Gamma' },
        { type: 'subscriber', subscriber_id: 'dup_c' },
      ]),
    );
    expect(first).toMatchObject({ applied: 2, failed: 0 });
    expect(await nameOf('dup_c')).toBe('Gamma');
  });

  it("sets a subscription's anchor as its export gave it, read as every date-time is, never in the future", async () => {
    const org = await createTestOrganization(ctx.db);
    await runImport(org, ndjson(CATALOG));
    const future = new Date(Date.now() + 86_400_000).toISOString();
    const done = await runImport(
      org,
      ndjson([
        { type: 'subscriber', subscriber_id: 'anchored_1' },
        { type: 'subscriber', subscriber_id: 'anchored_2' },
        {
          type: 'subscription',
          subscriber_id: 'anchored_1',
          plan_id: 'pro',
          anchored_at: '2020-01-02 03:04:05Z',
        },
        { type: 'subscription', subscriber_id: 'anchored_2', plan_id: 'pro', anchored_at: future },
      ]),
    );
    expect(done).toMatchObject({ status: 'succeeded', applied: 3, failed: 1 });
    expect(done.errors).toMatchObject([
      { line: 4, error: { code: 'VALIDATION_ERROR', details: { field: 'anchored_at', value: future } } },
    ]);
    const row = await ctx.db
      .selectFrom('subscriptions')
      .select('anchored_at')
      .where('organization_id', '=', org.organization_id)
      .where('subscriber_id', '=', 'anchored_1')
      .executeTakeFirstOrThrow();
    expect(row.anchored_at.toISOString()).toBe('2020-01-02T03:04:05.000Z');
  });

  it('validates only on a dry run, checking later lines against the records earlier ones would make', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson([
      ...CATALOG,
      ...people(3),
      { type: 'subscription', subscriber_id: 'ghost', plan_id: 'pro' },
    ]);
    const done = await runImport(org, body, { query: '?dry_run=true' });
    expect(done).toMatchObject({ status: 'succeeded', dry_run: true, lines: 10, applied: 9, failed: 1 });
    expect(done.errors[0]).toMatchObject({ line: 10, error: { code: 'NOT_FOUND' } });
    const subscribers = await ctx.app.inject({
      method: 'GET',
      url: '/org/subscribers',
      headers: org.headers,
    });
    expect(subscribers.json().subscribers).toEqual([]);
    const features = await ctx.app.inject({ method: 'GET', url: '/org/features', headers: org.headers });
    expect(features.json().features).toEqual([]);
  });

  it('answers 413 beyond the size limit and 415 for another content type, keeping nothing', async () => {
    const org = await createTestOrganization(ctx.db);
    const big = ndjson(
      Array.from({ length: 2000 }, (_, i) => ({
        type: 'subscriber',
        subscriber_id: `big_${i}`,
        name: 'x'.repeat(40),
      })),
    );
    expect(Buffer.byteLength(big)).toBeGreaterThan(MAX_BYTES);
    const tooLarge = await post(org, big);
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json().error.code).toBe('PAYLOAD_TOO_LARGE');
    const json = await ctx.app.inject({
      method: 'POST',
      url: '/org/imports',
      headers: org.headers,
      payload: { type: 'subscriber', subscriber_id: 'a' },
    });
    expect(json.statusCode).toBe(415);
    expect(json.json().error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    // Whatever the type (text, NDJSON's other name, none), the answer names the one to use, before the body is read.
    const lines = ndjson([{ type: 'subscriber', subscriber_id: 'a' }]);
    for (const type of ['text/plain', 'application/ndjson', undefined]) {
      const other = await ctx.app.inject({
        method: 'POST',
        url: '/org/imports',
        headers: { ...org.headers, ...(type ? { 'content-type': type } : {}) },
        payload: lines,
      });
      expect(other.statusCode, String(type)).toBe(415);
      expect(other.json().error.message).toBe('Send the import as application/x-ndjson, one record a line.');
    }
    // A malformed query is refused before the body is staged: no import row is made for it.
    const badQuery = await post(org, lines, { query: '?dry_run=1' });
    expect(badQuery.statusCode).toBe(422);
    expect(badQuery.json().error.details).toMatchObject({ field: 'dry_run', location: 'querystring' });
    const rows = await importIdsOf(org);
    expect(rows).toEqual([]);
  });

  it('needs subscribers:write, and refuses catalog lines to a key without catalog:write', async () => {
    const org = await createTestOrganization(ctx.db);
    const reader = await createKeyWithScopes(ctx.db, org.organization_id, ['subscribers:read']);
    const refused = await post({ ...org, headers: { 'x-api-key': reader.apiKey } }, ndjson(people(1)));
    expect(refused.statusCode).toBe(403);
    const writer = await createKeyWithScopes(ctx.db, org.organization_id, [
      'subscribers:write',
      'subscribers:read',
    ]);
    const done = await runImport(
      { ...org, headers: { 'x-api-key': writer.apiKey } },
      ndjson([CATALOG[0], { type: 'subscriber', subscriber_id: 'cus_x' }]),
    );
    expect(done).toMatchObject({ applied: 1, failed: 1 });
    expect(done.errors[0]).toMatchObject({ line: 1, error: { code: 'FORBIDDEN' } });
  });

  it('takes an Idempotency-Key: the same body answers the first import, another body 422', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson(people(1));
    const key = { 'idempotency-key': 'import-1' };
    const first = await post(org, ndjson([...CATALOG, ...people(1)]), { headers: key });
    expect(first.statusCode).toBe(202);
    await ctx.app.imports.runner.idle();
    const replay = await post(org, ndjson([...CATALOG, ...people(1)]), { headers: key });
    expect(replay.statusCode).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json().import_id).toBe(first.json().import_id);
    const reused = await post(org, body, { headers: key });
    expect(reused.statusCode).toBe(422);
    expect(reused.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const imports = await importIdsOf(org);
    expect(imports).toEqual([first.json().import_id]);
  });

  it('answers a repeat that was uploading while the first answered from the first, not 409', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson([...CATALOG, ...people(2)]);
    const key = { 'idempotency-key': 'import-during' };
    const uploadWhileFirstAnswers = async (repeatBody: string) => {
      const upload = new PassThrough();
      const repeat = ctx.app.inject({
        method: 'POST',
        url: '/org/imports',
        headers: { ...org.headers, 'content-type': 'application/x-ndjson', ...key },
        payload: upload,
      });
      const half = Math.floor(repeatBody.length / 2);
      upload.write(repeatBody.slice(0, half));
      // The repeat has looked its key up (nothing yet) and is staging its body.
      await vi.waitFor(async () => expect(await importIdsOf(org, 'receiving')).toHaveLength(1), {
        timeout: 10_000,
      });
      return { repeat, finish: () => upload.end(repeatBody.slice(half)) };
    };

    const same = await uploadWhileFirstAnswers(body);
    const first = await post(org, body, { headers: key });
    expect(first.statusCode, first.body).toBe(202);
    same.finish();
    const replay = await same.repeat;
    expect(replay.statusCode, replay.body).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(first.json());

    const other = await uploadWhileFirstAnswers(ndjson(people(1)));
    other.finish();
    const reused = await other.repeat;
    expect(reused.statusCode).toBe(422);
    expect(reused.json().error.code).toBe('IDEMPOTENCY_KEY_REUSED');

    await ctx.app.imports.runner.idle();
    const imports = await importIdsOf(org);
    expect(imports).toEqual([first.json().import_id]);
    // The repeat's entry was made before its body was read (the key had no answer yet): it says it was a replay, never
    // a second import. The other body's upload began after the first answered: refused at once, no entry.
    const entries = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events?limit=100',
      headers: org.headers,
    });
    const outcomes = entries
      .json()
      .audit_events.filter((e: { route: string }) => e.route === '/org/imports')
      .map((e: { status: number; details: unknown }) => [e.status, e.details]);
    expect(outcomes).toEqual([
      [202, expect.objectContaining({ import_id: first.json().import_id })],
      [202, { idempotent_replay: true }],
    ]);
  });

  it('records one audit entry per import, with its SHA-256 and line counts', async () => {
    const org = await createTestOrganization(ctx.db);
    const body = ndjson([...CATALOG, ...people(5)]);
    const done = await runImport(org, body);
    const entries = await ctx.app.inject({
      method: 'GET',
      url: '/org/audit-events?limit=100',
      headers: org.headers,
    });
    expect(entries.statusCode).toBe(200);
    const imports = entries.json().audit_events.filter((e: { route: string }) => e.route === '/org/imports');
    expect(imports).toHaveLength(1);
    expect(imports[0].details).toMatchObject({ import_id: done.import_id, sha256: done.sha256, lines: 13 });
  });

  it('answers 404 for an import of another organization', async () => {
    const org = await createTestOrganization(ctx.db);
    const other = await createTestOrganization(ctx.db);
    const done = await runImport(org, ndjson(CATALOG));
    const res = await ctx.app.inject({
      method: 'GET',
      url: `/org/imports/${done.import_id}`,
      headers: other.headers,
    });
    expect(res.statusCode).toBe(404);
    const lines = await ctx.app.inject({
      method: 'GET',
      url: `/org/imports/${done.import_id}/lines`,
      headers: other.headers,
    });
    expect(lines.statusCode).toBe(404);
  });
});
