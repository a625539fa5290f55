import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { EntitlementsError, EvalClient, type EvalClientOptions, type MeteredResult } from '../src/index.ts';
import { fakeService, sendServiceError } from './fake-service.ts';

/** Consumes and usage reports against a fake service: retries, idempotency keys, the cache, batches. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | null;
  body: unknown;
}

/** A fake service that records each request (method, path, Idempotency-Key, parsed body) before answering it. */
async function service(answer: (seen: Seen, res: ServerResponse, n: number) => void) {
  const seen: Seen[] = [];
  const started = await fakeService(async (req, res, n) => {
    const entry: Seen = {
      method: req.method ?? '',
      path: req.url ?? '',
      idempotencyKey: (req.headers['idempotency-key'] as string | undefined) ?? null,
      body: await jsonBody(req),
    };
    seen.push(entry);
    answer(entry, res, n);
  });
  cleanups.push(() => started.close());
  return { ...started, seen };
}

async function jsonBody(req: IncomingMessage): Promise<unknown> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return text ? JSON.parse(text) : null;
}

function client(baseUrl: string, options: Partial<EvalClientOptions> = {}) {
  const made = new EvalClient({
    baseUrl,
    apiKey: 'svc-mk-test',
    retry: { retries: 2, baseDelayMs: 1 },
    ...options,
  });
  cleanups.push(() => made.close());
  return made;
}

const metered = (used: number, overrides: Partial<MeteredResult> = {}): MeteredResult => ({
  feature: 'api_calls',
  kind: 'metered',
  limit: 100,
  used,
  remaining: Math.max(0, 100 - used),
  allowed: used < 100,
  period_start: '2026-11-01T00:00:00.000Z',
  resets_at: '2026-12-01T00:00:00.000Z',
  source: 'plan',
  credits: [],
  ...overrides,
});

const sendJson = (res: ServerResponse, body: unknown, headers: Record<string, string> = {}) =>
  res
    .writeHead(200, { 'content-type': 'application/json; charset=utf-8', ...headers })
    .end(JSON.stringify(body));

const sendDocumentWithMeter = (res: ServerResponse, used: number) =>
  sendJson(res, { subscriber_id: 'ann', entitlements: [metered(used)] }, { etag: `"used-${used}"` });

describe('check with consume', () => {
  it('sends one idempotency key per call, the same on each retry, and a new one for the next call', async () => {
    const fake = await service((seen, res, n) =>
      n === 1 ? sendServiceError(res, 503, 'SERVICE_UNAVAILABLE') : sendJson(res, metered(n)),
    );
    const sdk = client(fake.url);
    const first = await sdk.check('ann', 'api_calls', { consume: 3 });
    expect(fake.seen).toHaveLength(2);
    const [refused, retried] = fake.seen;
    expect(refused).toMatchObject({
      method: 'POST',
      path: '/org/subscribers/ann/entitlements/check',
      body: { feature: 'api_calls', consume: 3 },
    });
    expect(refused!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(retried!.idempotencyKey).toBe(refused!.idempotencyKey);
    expect(first).toMatchObject({
      kind: 'metered',
      allowed: true,
      limit: 100,
      metered: { used: 2, remaining: 98, resets_at: '2026-12-01T00:00:00.000Z' },
      fallback: false,
      replayed: false,
      idempotencyKey: refused!.idempotencyKey,
    });

    await sdk.check('ann', 'api_calls', { consume: 3 });
    expect(fake.seen[2]!.idempotencyKey).not.toBe(refused!.idempotencyKey);
  });

  it('sends the key given, and says when the service replayed its first answer', async () => {
    const fake = await service((_seen, res) => sendJson(res, metered(7), { 'idempotent-replayed': 'true' }));
    const answer = await client(fake.url).check('ann', 'api_calls', {
      consume: 1,
      idempotencyKey: 'order-17',
    });
    expect(fake.seen[0]!.idempotencyKey).toBe('order-17');
    expect(answer).toMatchObject({ idempotencyKey: 'order-17', replayed: true, metered: { used: 7 } });
  });

  it('answers the live credits the service lists, in its order, counted in remaining (issue 35)', async () => {
    const credits = [
      { credit_id: 'cr_promo', remaining: 30, expires_at: '2026-12-31T00:00:00.000Z' },
      { credit_id: 'cr_topup', remaining: 500, expires_at: null },
    ];
    const fake = await service((_seen, res) =>
      sendJson(res, metered(120, { remaining: 530, allowed: true, credits })),
    );
    const answer = await client(fake.url).check('ann', 'api_calls', { consume: 1 });
    expect(answer).toMatchObject({ allowed: true, metered: { used: 120, remaining: 530, credits } });
  });

  it('is never answered from the cache, and leaves the cached document alone', async () => {
    let used = 10;
    const fake = await service((seen, res) => {
      if (seen.method === 'GET') return sendDocumentWithMeter(res, used);
      used += 1;
      return sendJson(res, metered(used));
    });
    const sdk = client(fake.url, { cacheTtlMs: 60_000 });
    expect(await sdk.check('ann', 'api_calls')).toMatchObject({ kind: 'metered', metered: { used: 10 } });
    expect(await sdk.check('ann', 'api_calls')).toMatchObject({ metered: { used: 10 } });
    expect(fake.seen.map((seen) => seen.method)).toEqual(['GET']);

    expect(await sdk.check('ann', 'api_calls', { consume: 1 })).toMatchObject({ metered: { used: 11 } });
    expect(await sdk.check('ann', 'api_calls', { consume: 1 })).toMatchObject({ metered: { used: 12 } });
    expect(fake.seen.map((seen) => seen.method)).toEqual(['GET', 'POST', 'POST']);
    // A check without consume is still the cached document's, within its TTL.
    expect(await sdk.check('ann', 'api_calls')).toMatchObject({ metered: { used: 10 } });
    expect(fake.seen).toHaveLength(3);
  });

  it('answers an outage with the fallback, never the stale document: nothing was deducted', async () => {
    const fake = await service((seen, res) =>
      seen.method === 'GET'
        ? sendDocumentWithMeter(res, 10)
        : sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'),
    );
    const sdk = client(fake.url, { cacheTtlMs: 0, retry: { retries: 1, baseDelayMs: 1 } });
    await sdk.check('ann', 'api_calls');
    const closed = await sdk.check('ann', 'api_calls', { consume: 1 });
    expect(closed).toMatchObject({ allowed: false, fallback: true, stale: false, metered: null });
    expect(closed.error).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      idempotencyKey: closed.idempotencyKey,
    });
    const posts = fake.seen.filter((seen) => seen.method === 'POST');
    expect(posts).toHaveLength(2);
    expect(posts[1]!.idempotencyKey).toBe(posts[0]!.idempotencyKey);

    const withFallback = client(fake.url, { retry: { retries: 0 }, fallbacks: { api_calls: 10 } });
    expect(await withFallback.check('ann', 'api_calls', { consume: 10 })).toMatchObject({
      allowed: true,
      fallback: true,
    });
    expect(await withFallback.check('ann', 'api_calls', { consume: 11 })).toMatchObject({
      allowed: false,
      fallback: true,
    });
  });

  it('throws a mistake (consume on a flag: 422) with its idempotency key', async () => {
    const fake = await service((_seen, res) =>
      sendServiceError(res, 422, 'VALIDATION_ERROR', 'invalid_request_error'),
    );
    const error = await client(fake.url, { defaultFailMode: 'open' })
      .check('ann', 'sso', { consume: 1 })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(EntitlementsError);
    expect(error).toMatchObject({
      status: 422,
      code: 'VALIDATION_ERROR',
      idempotencyKey: fake.seen[0]!.idempotencyKey,
    });
    expect(fake.seen).toHaveLength(1);
  });
});

describe('report', () => {
  it('sends delta or set with one key, reused when a 429 is retried', async () => {
    const fake = await service((_seen, res, n) => {
      if (n === 1) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' });
        res.end(
          JSON.stringify({
            error: { type: 'rate_limit_error', code: 'RATE_LIMITED', message: 'x', details: {} },
          }),
        );
        return;
      }
      sendJson(res, metered(40));
    });
    const sdk = client(fake.url);
    const answer = await sdk.report('ann', 'api_calls', { delta: 40 });
    expect(fake.seen.map((seen) => [seen.method, seen.path, seen.body])).toEqual([
      ['POST', '/org/subscribers/ann/usage', { feature: 'api_calls', delta: 40 }],
      ['POST', '/org/subscribers/ann/usage', { feature: 'api_calls', delta: 40 }],
    ]);
    expect(fake.seen[1]!.idempotencyKey).toBe(fake.seen[0]!.idempotencyKey);
    expect(answer).toMatchObject({
      used: 40,
      remaining: 60,
      replayed: false,
      idempotencyKey: fake.seen[0]!.idempotencyKey,
    });

    await sdk.report('ann', 'seats', { set: 12 }, { idempotencyKey: 'seats-sync-1' });
    expect(fake.seen[2]).toMatchObject({
      body: { feature: 'seats', set: 12 },
      idempotencyKey: 'seats-sync-1',
    });
  });

  it('throws when it could not be applied, with the key to send it again', async () => {
    const fake = await service((_seen, res) => sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'));
    const error = (await client(fake.url, { retry: { retries: 1, baseDelayMs: 1 } })
      .report('ann', 'api_calls', { delta: 1 })
      .catch((caught: unknown) => caught)) as EntitlementsError;
    expect(error).toBeInstanceOf(EntitlementsError);
    expect(error.code).toBe('SERVICE_UNAVAILABLE');
    expect(fake.seen.map((seen) => seen.idempotencyKey)).toEqual([
      error.idempotencyKey,
      error.idempotencyKey,
    ]);
  });
});

describe('reportMany', () => {
  const events = (count: number) =>
    Array.from({ length: count }, (_, i) => ({
      subscriber_id: `sub_${i}`,
      feature: 'api_calls',
      delta: 1,
      ...(i === 0 ? { idempotency_key: 'mine-0' } : {}),
    }));

  it('sends chunks of at most 1,000 in order, each event with a key that a chunk retry resends', async () => {
    const fake = await service((seen, res, n) => {
      if (n === 2) return sendServiceError(res, 502, 'BAD_GATEWAY');
      const sent = (seen.body as { events: { subscriber_id: string }[] }).events;
      sendJson(res, { results: sent.map((event) => metered(Number(event.subscriber_id.slice(4)))) });
    });
    const answer = await client(fake.url).reportMany(events(2500));
    const chunks = fake.seen.map((seen) => (seen.body as { events: { idempotency_key: string }[] }).events);
    expect(chunks.map((chunk) => chunk.length)).toEqual([1000, 1000, 1000, 500]);
    expect(fake.seen.every((seen) => seen.method === 'POST' && seen.path === '/org/usage-events')).toBe(true);
    // The second chunk failed once (502) and was sent again with the same keys.
    expect(chunks[2]).toEqual(chunks[1]);
    const keys = [...chunks[0]!, ...chunks[2]!, ...chunks[3]!].map((event) => event.idempotency_key);
    expect(keys[0]).toBe('mine-0');
    expect(new Set(keys).size).toBe(2500);
    expect(answer.events.map((event) => event.idempotency_key)).toEqual(keys);
    expect(answer.results).toHaveLength(2500);
    expect(answer.results.map((result) => ('used' in result ? result.used : -1))).toEqual(
      Array.from({ length: 2500 }, (_, i) => i),
    );
  });

  it('answers the events of a chunk the service could not take, and every later one, with the failure', async () => {
    const fake = await service((seen, res, n) => {
      if (n > 1) return sendServiceError(res, 503, 'SERVICE_UNAVAILABLE');
      const sent = (seen.body as { events: unknown[] }).events;
      sendJson(res, { results: sent.map(() => metered(1)) });
    });
    const answer = await client(fake.url, { retry: { retries: 1, baseDelayMs: 1 } }).reportMany(events(2100));
    expect(fake.seen).toHaveLength(3);
    expect(answer.results.slice(0, 1000).every((result) => 'used' in result)).toBe(true);
    expect(answer.results.slice(1000)).toHaveLength(1100);
    for (const result of answer.results.slice(1000)) {
      expect(result).toMatchObject({ error: { code: 'SERVICE_UNAVAILABLE' } });
    }
    // Resending the failed events as returned sends the same keys: none is applied twice.
    const failed = answer.events.filter((_, i) => 'error' in answer.results[i]!);
    expect(failed.map((event) => event.idempotency_key)).toEqual(
      (fake.seen[1]!.body as { events: { idempotency_key: string }[] }).events
        .map((event) => event.idempotency_key)
        .concat(answer.events.slice(2000).map((event) => event.idempotency_key)),
    );
  });

  it('throws a mistake in the whole request (401) at once', async () => {
    const fake = await service((_seen, res) =>
      sendServiceError(res, 401, 'UNAUTHENTICATED', 'authentication_error'),
    );
    await expect(client(fake.url).reportMany(events(3))).rejects.toMatchObject({ status: 401 });
    expect(fake.seen).toHaveLength(1);
  });

  it('sends nothing for no events', async () => {
    const fake = await service((_seen, res) => sendJson(res, { results: [] }));
    expect(await client(fake.url).reportMany([])).toEqual({ results: [], events: [] });
    expect(fake.seen).toHaveLength(0);
  });
});
