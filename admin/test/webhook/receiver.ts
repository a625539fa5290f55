import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}
export interface Reply {
  status: number;
  headers?: Record<string, string>;
}

/** A local receiver: per path, the replies to give (then 200) and what arrived. */
export class Receiver {
  server: Server;
  received = new Map<string, Received[]>();
  replies = new Map<string, Reply[]>();
  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '/';
        const list = this.received.get(path) ?? [];
        list.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
        this.received.set(path, list);
        const reply = this.replies.get(path)?.shift() ?? { status: 200 };
        res.writeHead(reply.status, reply.headers ?? {}).end('ok');
      });
    });
  }
  listen(): Promise<number> {
    return new Promise((resolve) =>
      this.server.listen(0, '127.0.0.1', () => resolve((this.server.address() as AddressInfo).port)),
    );
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
  at(path: string): Received[] {
    return this.received.get(path) ?? [];
  }
}

/** Verifies with the outside verifier; throws when the signature does not match this secret. */
export const verify = (secret: string, message: Received) =>
  new Webhook(secret).verify(message.body, {
    'webhook-id': String(message.headers['webhook-id']),
    'webhook-timestamp': String(message.headers['webhook-timestamp']),
    'webhook-signature': String(message.headers['webhook-signature']),
  });

/** Polls until `probe` gives a truthy value; bounded in attempts and time. */
export async function until<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 1000; i++) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('condition not met in time');
}
