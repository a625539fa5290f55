import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { exemptFromRequestDeadline } from '../src/http/request-deadline.ts';

/** A server with Node's request timers at 400 ms, checked every 50 ms; exempting decided per request. */
let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

async function listen(exempt: (req: IncomingMessage) => boolean): Promise<number> {
  server = createServer(
    { requestTimeout: 400, headersTimeout: 400, connectionsCheckingInterval: 50 },
    (req, res) => {
      exempt(req);
      let bytes = 0;
      req.on('data', (chunk: Buffer) => (bytes += chunk.length));
      req.on('end', () => res.end(String(bytes)));
    },
  );
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Sends 10 chunks 100 ms apart (1 s in all, well past the 400 ms deadline, never idle); answers status and body. */
function trickle(port: number, path = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    void (async () => {
      for (let i = 0; i < 10; i++) {
        if (req.destroyed) return;
        req.write('x'.repeat(100));
        await sleep(100);
      }
      req.end();
    })();
  });
}

describe('exemptFromRequestDeadline', () => {
  it('lets one long upload finish past the server request timeout; others are still cut at it', async () => {
    const port = await listen((req) => req.url === '/import' && exemptFromRequestDeadline(req));
    expect(await trickle(port, '/import')).toEqual({ status: 200, body: '1000' });
    expect((await trickle(port, '/other')).status).toBe(408);
  });

  it('changes nothing for a request without a parser (an injected one)', () => {
    expect(exemptFromRequestDeadline({ socket: {} } as unknown as IncomingMessage)).toBe(false);
  });
});
