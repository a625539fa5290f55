import { connect } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeRequestTimers } from '@ent/common/http/server-options';

/** A short receive timeout, as the services use 30 s: what matters is that Node enforces it at all. */
const TIMEOUT_MS = 1000;

let app: FastifyInstance;
let port: number;
beforeAll(async () => {
  app = Fastify({ requestTimeout: TIMEOUT_MS, http: nodeRequestTimers(TIMEOUT_MS) });
  app.post('/echo', async (request) => ({ received: request.body }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as { port: number }).port;
});
afterAll(() => app.close());

/** Sends the headers, then the body a byte every `everyMs`; resolves with the status line of what came back. */
function slowRequest(body: string, everyMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    socket.write(
      `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    if (everyMs > 0) timer = setInterval(() => sent < body.length && socket.write(body[sent++]!), everyMs);
    socket.once('data', (data) => {
      clearInterval(timer);
      socket.destroy();
      resolve(data.toString().split('\r\n')[0]!);
    });
    socket.once('error', reject);
    setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      reject(new Error('no answer within 10 s'));
    }, 10_000).unref();
  });
}

describe('receiving a request (Node timers set at server creation)', () => {
  it('cuts off a request whose body never comes', async () => {
    expect(await slowRequest('0123456789', 0)).toBe('HTTP/1.1 408 Request Timeout');
  });

  it('cuts off a body trickled past the timeout instead of serving it', async () => {
    // 12 bytes, one every 250 ms: 3 s to arrive, three times the timeout.
    expect(await slowRequest('abcdefghijkl', 250)).toBe('HTTP/1.1 408 Request Timeout');
  });

  it('serves a request that arrives within it', async () => {
    expect(await slowRequest('abc', 50)).toBe('HTTP/1.1 200 OK');
  });
});
