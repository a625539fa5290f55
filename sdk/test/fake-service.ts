import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  requestNumber: number,
) => void | Promise<void>;

/**
 * A real HTTP server on 127.0.0.1 that answers like the service, for what the real processes cannot be made to do
 * on demand: a 500 with the service's error body, a 408, a response held back while the caller invalidates.
 */
export async function fakeService(
  handler: FakeHandler,
): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let count = 0;
  const server: Server = createServer((req, res) => {
    count += 1;
    void Promise.resolve(handler(req, res, count)).catch(() => {
      if (!res.headersSent) res.writeHead(599);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A subscriber's document as `GET /org/subscribers/{id}/entitlements?all=true` sends it: `seats` and `sso`. */
export function sendDocument(
  res: ServerResponse,
  subscriberId: string,
  seats: number,
  etag = `"seats-${seats}"`,
) {
  const body = {
    subscriber_id: subscriberId,
    entitlements: [
      { feature: 'seats', kind: 'limit', limit: seats, source: 'plan' },
      { feature: 'sso', kind: 'flag', allowed: true, source: 'plan' },
    ],
  };
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', etag }).end(JSON.stringify(body));
}

/** The service's own error body (SPEC.md part 7), as common/src/http/error-handler.ts shapes it. */
export function sendServiceError(res: ServerResponse, status: number, code: string, type = 'api_error') {
  const body = { error: { type, code, message: `fake ${code}`, request_id: 'req_fake', details: {} } };
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

/** A promise with its resolver outside, to hold a response back until the test lets it go. */
export function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}
