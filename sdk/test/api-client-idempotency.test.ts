import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createApiClient } from '../src/index.ts';

/** What each attempt carried, and how the fake service answers the next ones (then 2xx). */
interface Seen {
  method: string;
  key: string | undefined;
  body: string;
  at: number;
}
let seen: Seen[] = [];
let failures: ('drop' | 'hang' | 'slow-body' | 503 | 409 | 422 | '429-1s' | '429-60s')[] = [];
let server: Server;
let baseUrl: string;

function answer(req: IncomingMessage, res: ServerResponse, body: string) {
  const key = req.headers['idempotency-key'];
  seen.push({ method: req.method!, key: typeof key === 'string' ? key : undefined, body, at: Date.now() });
  const failure = failures.shift();
  const json = (status: number, value: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  if (failure === 'drop') return req.socket.destroy();
  // A service that stopped answering: the attempt's timeout ends it (the socket closes when the client gives up).
  if (failure === 'hang') return;
  if (failure === 'slow-body') {
    // The headers at once, the body 500 ms later (a stream, as an export is).
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"subscribers": [], ');
    return void setTimeout(() => res.end('"has_more": false}'), 500);
  }
  if (failure === '429-1s' || failure === '429-60s')
    return res
      .writeHead(429, {
        'content-type': 'application/json',
        'retry-after': failure === '429-1s' ? '1' : '60',
      })
      .end(JSON.stringify({ error: { code: 'RATE_LIMITED', message: 'slow down', details: {} } }));
  if (failure === 503) return json(503, { error: { code: 'SERVICE_UNAVAILABLE', message: 'later' } });
  if (failure === 409)
    return json(409, {
      error: { code: 'CONFLICT', message: 'running', details: { field: 'Idempotency-Key' } },
    });
  if (failure === 422) return json(422, { error: { code: 'VALIDATION_ERROR', message: 'no', details: {} } });
  if (req.method === 'GET') return json(200, { subscribers: [], has_more: false });
  return json(201, { subscriber_id: 'cus_1', name: null, created_at: 'x', updated_at: 'x' });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => answer(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  seen = [];
  failures = [];
});

const client = () =>
  createApiClient({ baseUrl, apiKey: 'svc-test', retry: { baseDelayMs: 1, maxDelayMs: 5 } });
const create = () => client().POST('/org/subscribers', { body: { subscriber_id: 'cus_1' } });

describe('createApiClient writes', () => {
  it('carry an Idempotency-Key, a new one per call', async () => {
    await create();
    await create();
    expect(seen).toHaveLength(2);
    for (const attempt of seen) expect(attempt.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[0]!.key).not.toBe(seen[1]!.key);
  });

  it.each([
    ['a dropped connection', 'drop'] as const,
    ['a 503', 503] as const,
    ['a 409 for the key in flight', 409] as const,
  ])('are retried after %s with the same key and body', async (_case, failure) => {
    failures = [failure];
    const { response, data } = await create();
    expect(response.status).toBe(201);
    expect(data?.subscriber_id).toBe('cus_1');
    expect(seen).toHaveLength(2);
    expect(seen[1]!.key).toBe(seen[0]!.key);
    expect(seen[1]!.body).toBe(seen[0]!.body);
    expect(JSON.parse(seen[0]!.body)).toEqual({ subscriber_id: 'cus_1' });
  });

  it('give up after the retries with the last answer, and do not retry a client error', async () => {
    failures = [503, 503, 503];
    expect((await create()).response.status).toBe(503);
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((attempt) => attempt.key)).size).toBe(1);
    seen = [];
    failures = [422];
    expect((await create()).response.status).toBe(422);
    expect(seen).toHaveLength(1);
  });

  it('wait out a Retry-After, and answer one above maxRetryAfterMs at once, as the eval client does', async () => {
    failures = ['429-1s'];
    expect((await create()).response.status).toBe(201);
    expect(seen).toHaveLength(2);
    // A floor, not a timing: the second attempt is not sent before the second asked for (less timer rounding).
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(990);
    seen = [];
    failures = ['429-60s'];
    const refused = await create();
    expect(refused.response.status).toBe(429);
    expect(refused.response.headers.get('retry-after')).toBe('60');
    expect(seen).toHaveLength(1);
  });

  it("keep the caller's own key", async () => {
    await client().POST('/org/subscribers', {
      body: { subscriber_id: 'cus_1' },
      params: { header: { 'Idempotency-Key': 'order-42' } },
    });
    expect(seen[0]!.key).toBe('order-42');
  });

  it('end an attempt without an answer at timeoutMs: a write is retried under its key, a read rejects', async () => {
    const timed = createApiClient({
      baseUrl,
      apiKey: 'svc-test',
      timeoutMs: 200,
      retry: { baseDelayMs: 1, maxDelayMs: 5 },
    });
    failures = ['hang'];
    const written = await timed.POST('/org/subscribers', { body: { subscriber_id: 'cus_1' } });
    expect(written.response.status).toBe(201);
    expect(seen).toHaveLength(2);
    expect(seen[1]!.key).toBe(seen[0]!.key);
    expect(seen[1]!.body).toBe(seen[0]!.body);
    seen = [];
    failures = ['hang'];
    await expect(timed.GET('/org/subscribers')).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(seen).toHaveLength(1);
  });

  it('times the answer, not its body: a body that takes longer than timeoutMs is read whole', async () => {
    const timed = createApiClient({ baseUrl, apiKey: 'svc-test', timeoutMs: 200 });
    failures = ['slow-body'];
    const read = await timed.GET('/org/subscribers');
    expect(read.response.status).toBe(200);
    expect(read.data).toEqual({ subscribers: [], has_more: false });
  });

  it('reads carry no key and are sent once', async () => {
    failures = [503];
    expect((await client().GET('/org/subscribers')).response.status).toBe(503);
    expect(seen).toMatchObject([{ method: 'GET', key: undefined, body: '' }]);
  });
});
