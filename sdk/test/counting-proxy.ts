import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Seen {
  method: string;
  path: string;
  ifNoneMatch: string | null;
  idempotencyKey: string | null;
  status: number;
  retryAfter: string | null;
  at: number;
}

export interface ProxyOptions {
  /**
   * Whether to lose the answer to this request: it reaches the gateway, which applies it, and the client gets a 502
   * instead of the answer (a connection that broke on the way back).
   */
  loseAnswer?: (request: { method: string; path: string }) => boolean;
}

/** A plain HTTP proxy in front of a gateway that records every request the SDK actually sends. */
export async function countingProxy(
  target: string,
  options: ProxyOptions = {},
): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return chunks.length ? Buffer.concat(chunks) : undefined;
  };
  const server: Server = createServer(async (req, res) => {
    const body = await read(req);
    const headers: Record<string, string> = {};
    for (const name of ['x-api-key', 'content-type', 'if-none-match', 'accept', 'idempotency-key']) {
      const value = req.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const record = (status: number, retryAfter: string | null) =>
      seen.push({
        method: req.method ?? '',
        path: req.url ?? '',
        ifNoneMatch: headers['if-none-match'] ?? null,
        idempotencyKey: headers['idempotency-key'] ?? null,
        status,
        retryAfter,
        at: Date.now(),
      });
    try {
      const upstream = await fetch(`${target}${req.url}`, { method: req.method, headers, body });
      const text = await upstream.text();
      if (options.loseAnswer?.({ method: req.method ?? '', path: req.url ?? '' })) {
        record(502, null);
        res.writeHead(502).end();
        return;
      }
      record(upstream.status, upstream.headers.get('retry-after'));
      const out: Record<string, string> = {};
      upstream.headers.forEach((value, name) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(name))
          out[name] = value;
      });
      res.writeHead(upstream.status, out).end(text);
    } catch {
      record(502, null);
      res.writeHead(502).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
