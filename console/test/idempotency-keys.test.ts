import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../src/api/client.ts';

/** A real HTTP server that answers each request with the next planned status (0: drops the connection). */
let server: Server;
let base: string;
const planned: number[] = [];
const received: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push(req.headers);
      const status = planned.shift() ?? 200;
      if (status === 0) return void res.socket?.destroy();
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(status < 300 ? '{}' : '{"error":{"code":"INTERNAL_ERROR","message":"x","request_id":"r"}}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

const lastKey = () => received.at(-1)!['idempotency-key'];
const submit = (body: object) =>
  request('POST', `${base}/org/features`, { body }).then(
    () => 'ok',
    () => 'failed',
  );

describe('the console sends an Idempotency-Key with each write', () => {
  it('reuses it when the same form is submitted again after no answer or an error, until one succeeds', async () => {
    planned.push(0, 503, 201, 201);
    const body = { key: 'sso', name: 'SSO', kind: 'flag' };
    expect(await submit(body)).toBe('failed');
    const key = lastKey();
    expect(key).toMatch(/^console-[0-9a-f]{32}$/);
    expect(await submit(body)).toBe('failed');
    expect(lastKey()).toBe(key);
    expect(await submit(body)).toBe('ok');
    expect(lastKey()).toBe(key);
    // After a success the same submission is a new write.
    expect(await submit(body)).toBe('ok');
    expect(lastKey()).not.toBe(key);
  });

  it('another form (another body) gets another key, and reads get none', async () => {
    planned.push(0, 201, 200);
    expect(await submit({ key: 'a', name: 'A', kind: 'flag' })).toBe('failed');
    const first = lastKey();
    expect(await submit({ key: 'b', name: 'B', kind: 'flag' })).toBe('ok');
    expect(lastKey()).not.toBe(first);
    await request('GET', `${base}/org/features`);
    expect(lastKey()).toBeUndefined();
  });

  it('answers the same write submitted twice at once (a double click) from one request', async () => {
    const before = received.length;
    planned.push(201);
    const body = { key: 'twice', name: 'Twice', kind: 'flag' };
    expect(await Promise.all([submit(body), submit(body)])).toEqual(['ok', 'ok']);
    expect(received.length - before).toBe(1);
    // Once answered, the same submission is a new write again.
    expect(await submit(body)).toBe('ok');
    expect(received.length - before).toBe(2);
  });
});
