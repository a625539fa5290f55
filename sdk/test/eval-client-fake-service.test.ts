import { afterEach, describe, expect, it } from 'vitest';
import { EntitlementsError, EvalClient, type EvalClientOptions } from '../src/index.ts';
import { fakeService, gate, sendDocument, sendServiceError } from './fake-service.ts';

/** Behaviour the real processes cannot be made to show on demand, against a fake service on 127.0.0.1. */
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function service(...args: Parameters<typeof fakeService>) {
  const started = await fakeService(...args);
  cleanups.push(() => started.close());
  return started;
}

function client(baseUrl: string, options: Partial<EvalClientOptions> = {}) {
  const made = new EvalClient({ baseUrl, apiKey: 'svc-mk-test', retry: { retries: 0 }, ...options });
  cleanups.push(() => made.close());
  return made;
}

/** Whether the condition holds within the time: false (not a hang) when the SDK never gets there. */
async function within(ms: number, condition: () => boolean): Promise<boolean> {
  const until = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return true;
}

describe('an outage is decided by the status, whatever the body says', () => {
  const outages: [number, string][] = [
    [500, 'INTERNAL_ERROR'],
    [502, 'BAD_GATEWAY'],
    [503, 'SERVICE_UNAVAILABLE'],
    [503, 'A_CODE_THIS_SDK_DOES_NOT_KNOW'],
    [504, 'GATEWAY_TIMEOUT'],
    [507, 'INSUFFICIENT_STORAGE'],
    [408, 'REQUEST_TIMEOUT'],
  ];

  it.each(outages)(
    '%i %s with the service error body: a fallback when nothing is cached',
    async (status, code) => {
      const fake = await service((_req, res) => sendServiceError(res, status, code));
      const sdk = client(fake.url, { fallbacks: { seats: 5 } });
      const answer = await sdk.check('ann', 'seats');
      expect(answer).toMatchObject({ feature: 'seats', limit: 5, fallback: true, stale: false });
      expect(answer.error).toBeInstanceOf(EntitlementsError);
      expect(answer.error).toMatchObject({ code, status });
    },
  );

  it.each(outages)('%i %s with the service error body: the cached document, stale', async (status, code) => {
    const fake = await service((_req, res, n) =>
      n === 1 ? sendDocument(res, 'ann', 25) : sendServiceError(res, status, code),
    );
    const sdk = client(fake.url, { cacheTtlMs: 0, fallbacks: { seats: 5 } });
    expect(await sdk.check('ann', 'seats')).toMatchObject({ limit: 25, stale: false });
    const answer = await sdk.check('ann', 'seats');
    expect(answer).toMatchObject({ limit: 25, stale: true, fallback: false });
    expect(answer.error).toMatchObject({ code, status });
    expect(await sdk.list('ann')).toMatchObject({
      stale: true,
      entitlements: [{ feature: 'seats', limit: 25 }, { feature: 'sso' }],
    });
  });

  it('a 500 with a body that is not the service’s falls back too', async () => {
    const fake = await service((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('oops');
    });
    const answer = await client(fake.url, { fallbacks: { seats: 5 } }).check('ann', 'seats');
    expect(answer).toMatchObject({ limit: 5, fallback: true });
    expect(answer.error).toMatchObject({ status: 500 });
  });

  it('retries a 408 like its own timeout, and then answers', async () => {
    const fake = await service((_req, res, n) =>
      n === 1
        ? sendServiceError(res, 408, 'REQUEST_TIMEOUT', 'invalid_request_error')
        : sendDocument(res, 'ann', 25),
    );
    const sdk = client(fake.url, { retry: { retries: 1, baseDelayMs: 1 }, fallbacks: { seats: 5 } });
    expect(await sdk.check('ann', 'seats')).toMatchObject({ limit: 25, fallback: false, stale: false });
    expect(fake.requests()).toBe(2);
  });

  const mistakes: [number, string][] = [
    [400, 'VALIDATION_ERROR'],
    [401, 'UNAUTHENTICATED'],
    [403, 'FORBIDDEN'],
    [404, 'NOT_FOUND'],
    [422, 'VALIDATION_ERROR'],
    // A 4xx is the caller's mistake even if a body (a proxy's, say) names an outage.
    [404, 'SERVICE_UNAVAILABLE'],
  ];

  it.each(mistakes)(
    '%i %s is thrown, never masked by a cached document or a fallback',
    async (status, code) => {
      const fake = await service((_req, res, n) =>
        n === 1 ? sendDocument(res, 'ann', 25) : sendServiceError(res, status, code, 'invalid_request_error'),
      );
      const sdk = client(fake.url, { cacheTtlMs: 0, fallbacks: { seats: 5 }, defaultFailMode: 'open' });
      await sdk.check('ann', 'seats');
      await expect(sdk.check('ann', 'seats')).rejects.toMatchObject({ code, status });
      await expect(sdk.list('ann')).rejects.toMatchObject({ code, status });
    },
  );
});

describe('invalidate() and a request already in flight', () => {
  /** The document's `seats` as the service would read it when a request arrives; a write changes it. */
  async function serviceWithHeldRequests(held: Map<number, ReturnType<typeof gate>>) {
    const state = { seats: 100 };
    const fake = await service(async (_req, res, n) => {
      const seats = state.seats;
      await held.get(n)?.opened;
      sendDocument(res, 'ann', seats);
    });
    return { fake, state };
  }

  it.each([
    ['invalidate(id)', (sdk: ReturnType<typeof client>) => sdk.invalidate('ann')],
    ['invalidate() of everything', (sdk: ReturnType<typeof client>) => sdk.invalidate()],
  ])(
    'a check after %s does not join the older request, whose answer is then not cached',
    async (_name, invalidate) => {
      const first = gate();
      const { fake, state } = await serviceWithHeldRequests(new Map([[1, first]]));
      const sdk = client(fake.url, { cacheTtlMs: 60_000 });
      try {
        const beforeWrite = sdk.check('ann', 'seats');
        expect(await within(2000, () => fake.requests() === 1)).toBe(true);
        state.seats = 5; // a write of this server, acknowledged while the check above is in flight
        invalidate(sdk);
        const afterWrite = sdk.check('ann', 'seats');
        expect(await within(1000, () => fake.requests() === 2), 'a request of its own').toBe(true);
        expect(await afterWrite).toMatchObject({ limit: 5, stale: false, fallback: false });

        first.open();
        // The call made before the invalidation may answer what it read; the cache must not take it.
        expect((await beforeWrite).limit).toBe(100);
        expect(await sdk.check('ann', 'seats')).toMatchObject({ limit: 5, stale: false });
        expect(fake.requests()).toBe(2);
      } finally {
        first.open();
      }
    },
  );

  it('an older request that ends after the invalidation leaves nothing cached', async () => {
    const first = gate();
    const { fake, state } = await serviceWithHeldRequests(new Map([[1, first]]));
    const sdk = client(fake.url, { cacheTtlMs: 60_000 });
    const beforeWrite = sdk.check('ann', 'seats');
    expect(await within(2000, () => fake.requests() === 1)).toBe(true);
    state.seats = 5;
    sdk.invalidate('ann');
    first.open();
    expect((await beforeWrite).limit).toBe(100);
    expect(await sdk.check('ann', 'seats')).toMatchObject({ limit: 5, stale: false });
    expect(fake.requests()).toBe(2);
  });

  it('checks after the invalidation still share one request when the older one ends first', async () => {
    const [first, second] = [gate(), gate()];
    const { fake, state } = await serviceWithHeldRequests(
      new Map([
        [1, first],
        [2, second],
      ]),
    );
    const sdk = client(fake.url, { cacheTtlMs: 60_000 });
    try {
      const beforeWrite = sdk.check('ann', 'seats');
      expect(await within(2000, () => fake.requests() === 1)).toBe(true);
      state.seats = 5;
      sdk.invalidate('ann');
      const afterWrite = sdk.check('ann', 'seats');
      expect(await within(1000, () => fake.requests() === 2), 'a request of its own').toBe(true);
      first.open();
      expect((await beforeWrite).limit).toBe(100);
      // The older request ending must not unregister the newer one: this check joins it.
      const joining = sdk.check('ann', 'seats');
      second.open();
      expect((await afterWrite).limit).toBe(5);
      expect((await joining).limit).toBe(5);
      expect(fake.requests()).toBe(2);
    } finally {
      first.open();
      second.open();
    }
  });

  it('invalidating another subscriber leaves a request in flight shared', async () => {
    const first = gate();
    const { fake } = await serviceWithHeldRequests(new Map([[1, first]]));
    const sdk = client(fake.url, { cacheTtlMs: 60_000 });
    const one = sdk.check('ann', 'seats');
    expect(await within(2000, () => fake.requests() === 1)).toBe(true);
    sdk.invalidate('bob');
    const two = sdk.check('ann', 'seats');
    first.open();
    expect([(await one).limit, (await two).limit]).toEqual([100, 100]);
    expect(await sdk.check('ann', 'seats')).toMatchObject({ limit: 100 });
    expect(fake.requests()).toBe(1);
  });
});

describe('feature keys that are also Object.prototype names', () => {
  it.each(['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf'])(
    '%s takes defaultFailMode when failModes has no entry of its own',
    async (feature) => {
      const fake = await service((_req, res) => sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'));
      const sdk = client(fake.url, { defaultFailMode: 'open', failModes: { seats: 'closed' } });
      expect(await sdk.check('ann', feature)).toMatchObject({ allowed: true, limit: null, fallback: true });
      const closed = client(fake.url, { defaultFailMode: 'closed', failModes: { seats: 'open' } });
      expect(await closed.check('ann', feature)).toMatchObject({ allowed: false, limit: 0, fallback: true });
    },
  );

  it('an own entry for such a key is used, in failModes and in fallbacks', async () => {
    const fake = await service((_req, res) => sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'));
    const failModes = JSON.parse('{"constructor":"open","__proto__":"open"}') as Record<string, 'open'>;
    const sdk = client(fake.url, { defaultFailMode: 'closed', failModes, fallbacks: { toString: 7 } });
    expect(await sdk.check('ann', 'constructor')).toMatchObject({ allowed: true, limit: null });
    expect(await sdk.check('ann', '__proto__')).toMatchObject({ allowed: true, limit: null });
    expect(await sdk.check('ann', 'toString')).toMatchObject({ kind: 'limit', limit: 7 });
    expect(await sdk.check('ann', 'valueOf')).toMatchObject({ allowed: false, limit: 0 });
  });
});

describe('a feature the cached document lacks', () => {
  it('is unknown, never a fallback, when asking again meets an outage', async () => {
    const fake = await service((req, res, n) =>
      n === 1 ? sendDocument(res, 'ann', 5) : sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'),
    );
    const sdk = client(fake.url, { defaultFailMode: 'open', cacheTtlMs: 60_000, retry: { retries: 0 } });
    expect((await sdk.check('ann', 'seats')).limit).toBe(5);
    await expect(sdk.check('ann', 'seatz')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('is unknown, never a fallback, when the document has expired and the outage meets its revalidation', async () => {
    const fake = await service((req, res, n) =>
      n === 1 ? sendDocument(res, 'ann', 5) : sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'),
    );
    const sdk = client(fake.url, { defaultFailMode: 'open', cacheTtlMs: 0, retry: { retries: 0 } });
    expect((await sdk.check('ann', 'seats')).limit).toBe(5);
    await expect(sdk.check('ann', 'seatz')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // A subscriber no document was read for: the fallback, as before.
    expect(await sdk.check('bob', 'seatz')).toMatchObject({ fallback: true, allowed: true });
    // With serveStale false no stale document speaks: the fallback.
    const fresh = await service((req, res, n) =>
      n === 1 ? sendDocument(res, 'ann', 5) : sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'),
    );
    const noStale = client(fresh.url, {
      defaultFailMode: 'open',
      cacheTtlMs: 0,
      serveStale: false,
      retry: { retries: 0 },
    });
    expect((await noStale.check('ann', 'seats')).limit).toBe(5);
    expect(await noStale.check('ann', 'seatz')).toMatchObject({ fallback: true });
  });
});

describe("a consume's number fallback", () => {
  it('allows it when it covers the amount, else leaves it to the fail mode', async () => {
    const fake = await service((_req, res) => sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'));
    const open = client(fake.url, { fallbacks: { api_calls: 3 }, failModes: { api_calls: 'open' } });
    const closed = client(fake.url, { fallbacks: { api_calls: 3 }, failModes: { api_calls: 'closed' } });
    expect(await open.check('ann', 'api_calls', { consume: 3 })).toMatchObject({
      fallback: true,
      allowed: true,
    });
    expect(await open.check('ann', 'api_calls', { consume: 10 })).toMatchObject({ allowed: true, limit: 3 });
    expect(await closed.check('ann', 'api_calls', { consume: 10 })).toMatchObject({
      allowed: false,
      limit: 3,
    });
    expect(await closed.check('ann', 'api_calls', { consume: 2 })).toMatchObject({ allowed: true });
    // A check is no consume: a fallback of 0 denies whatever the fail mode.
    const zero = client(fake.url, { fallbacks: { seats: 0 }, defaultFailMode: 'open' });
    expect(await zero.check('ann', 'seats')).toMatchObject({ fallback: true, allowed: false, limit: 0 });
  });
});

describe('a closed client', () => {
  it('throws CLIENT_CLOSED on every call, never a fallback, however open its fail mode', async () => {
    const fake = await service((req, res) => sendDocument(res, 'ann', 5));
    const sdk = client(fake.url, { defaultFailMode: 'open' });
    expect((await sdk.check('ann', 'seats')).limit).toBe(5);
    await sdk.close();
    const asked = fake.requests();
    for (const call of [
      () => sdk.check('ann', 'seats', { consume: 1 }),
      () => sdk.list('bob'),
      () => sdk.report('ann', 'seats', { delta: 1 }),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'CLIENT_CLOSED', status: null });
    }
    expect(fake.requests()).toBe(asked);
    // Not even from the cache.
    await expect(sdk.check('ann', 'seats')).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
  });

  it('throws CLIENT_CLOSED from a call that was waiting to retry when it was closed', async () => {
    const fake = await service((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code: 'SERVICE_UNAVAILABLE', message: 'later', details: {} } }));
    });
    const sdk = client(fake.url, { defaultFailMode: 'open', retry: { retries: 2 } });
    const waiting = sdk.check('ann', 'seats', { consume: 1 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await sdk.close();
    await expect(waiting).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
    expect(fake.requests()).toBe(1);
  });
});

describe('a 2xx that is not the service’s answer', () => {
  it('is thrown as UNEXPECTED_RESPONSE, never read as a document or a consume, whatever the fail mode', async () => {
    const page = await service((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>console</title>');
    });
    const sdk = client(page.url, { defaultFailMode: 'open' });
    for (const call of [
      () => sdk.check('ann', 'seats'),
      () => sdk.list('ann'),
      () => sdk.check('ann', 'seats', { consume: 1 }),
      () => sdk.report('ann', 'seats', { delta: 1 }),
      () => sdk.reportMany([{ subscriber_id: 'ann', feature: 'seats', delta: 1 }]),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'UNEXPECTED_RESPONSE', status: 200 });
    }
    const empty = await service((_req, res) => void res.writeHead(200).end());
    await expect(client(empty.url).check('ann', 'seats', { consume: 1 })).rejects.toMatchObject({
      code: 'UNEXPECTED_RESPONSE',
    });
  });
});

describe('a fallback for a subscriber never read', () => {
  it("names the feature's kind as another subscriber's document gave it, not the fallback value's type", async () => {
    const fake = await service((req, res, n) =>
      n === 1 ? sendDocument(res, 'ann', 5) : sendServiceError(res, 503, 'SERVICE_UNAVAILABLE'),
    );
    const sdk = client(fake.url, { defaultFailMode: 'closed', fallbacks: { sso: 1 }, retry: { retries: 0 } });
    expect((await sdk.check('ann', 'seats')).kind).toBe('limit');
    expect(await sdk.check('bob', 'seats')).toMatchObject({ kind: 'limit', fallback: true, allowed: false });
    expect(await sdk.check('bob', 'sso')).toMatchObject({ kind: 'flag', fallback: true, limit: 1 });
    // A feature no document has named: as before, from the value (none here: the fail mode's null).
    expect(await sdk.check('bob', 'exports')).toMatchObject({ kind: null, fallback: true });
  });
});
