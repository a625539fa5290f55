import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drive } from '../src/load.ts';

// A server that answers every request after a delay, counting what it received: each connection of a timed load
// has a request in flight when its time is up.
let server: Server;
let received = 0;
let url = '';

beforeAll(async () => {
  server = createServer((request, response) => {
    received++;
    request.resume();
    request.on('end', () =>
      setTimeout(() => {
        response.setHeader('content-type', 'application/json');
        response.end('{}');
      }, 40),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('a timed load', () => {
  it('counts the answer of every request it sent, those in flight when its time was up included', async () => {
    received = 0;
    const figures = await drive({
      url,
      apiKey: 'unused',
      route: 'check',
      subscribers: 100,
      features: 4,
      connections: 8,
      seconds: 1,
    });
    expect(figures.errors).toBe(0);
    expect(figures.requests).toBeGreaterThan(8);
    expect(figures.statuses['200']).toBe(received);
    expect(figures.requests).toBe(received);
  });
});
