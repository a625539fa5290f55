import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { LINGER_BYTES, LINGER_MS } from '@ent/common/http/lingering-close';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { freePort, healthy, serviceEnv, startNode, type Started } from '../processes.ts';

/**
 * Real processes and Node's own `fetch` (undici), which keeps writing a body while the answer arrives: a body over
 * the limit must end in a 413 it can read, never in EPIPE or ECONNRESET because the socket was closed under it.
 */
let database: TestDatabase;
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
const started: Started[] = [];
const urls = { gateway: '', admin: '' };

beforeAll(async () => {
  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({
    database,
    redisPort: 6379,
    prefix: testRedisPrefix(),
    logLevel: 'error',
  });
  const gatewayPort = await freePort();
  started.push(startNode('admin/src/server.ts', env));
  started.push(startNode('gateway/src/server.ts', { ...env, GATEWAY_PORT: String(gatewayPort) }));
  urls.admin = adminUrl;
  urls.gateway = `http://127.0.0.1:${gatewayPort}`;
  await Promise.all([healthy(urls.admin), healthy(urls.gateway)]);
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Large bodies');
}, 90_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
  await db?.destroy();
  await database?.drop();
}, 60_000);

const MIB = 1024 * 1024;
/** Each size several times: an early close lost the answer in some runs only (most at 8 MiB and over). */
const REPEATS = 3;

type Target = { name: string; base: () => string; path: string; headers: () => Record<string, string> };
const targets: Target[] = [
  {
    name: 'gateway, forwarded to admin',
    base: () => urls.gateway,
    path: '/org/features',
    headers: () => org.headers,
  },
  {
    name: 'gateway, its own eval route',
    base: () => urls.gateway,
    path: '/org/subscribers/alice/entitlements/check',
    headers: () => org.headers,
  },
  {
    name: 'gateway, a console route',
    base: () => urls.gateway,
    path: '/console/api/sign-in',
    headers: () => ({}),
  },
  { name: 'admin', base: () => urls.admin, path: '/org/features', headers: () => org.headers },
  {
    name: 'admin, a console route',
    base: () => urls.admin,
    path: '/console/api/sign-in',
    headers: () => ({}),
  },
];

/** The status and error code fetch reports, or the connection error it failed with instead. */
async function post(target: Target, body: string | ReadableStream<Uint8Array>): Promise<string> {
  try {
    const res = await fetch(`${target.base()}${target.path}`, {
      method: 'POST',
      headers: { ...target.headers(), 'content-type': 'application/json' },
      body,
      ...(typeof body === 'string' ? {} : { duplex: 'half' }),
    } as RequestInit);
    const parsed = JSON.parse(await res.text()) as {
      error?: { type?: string; code?: string; request_id?: string };
    };
    const shaped =
      parsed.error?.type === 'invalid_request_error' && typeof parsed.error.request_id === 'string';
    return `${res.status} ${parsed.error?.code}${shaped ? '' : ' (not the error body)'}`;
  } catch (error) {
    const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
    return `failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`;
  }
}

/** A JSON object of about `bytes` bytes, streamed without a Content-Length (chunked). */
function chunkedBody(bytes: number): ReadableStream<Uint8Array> {
  const chunk = new TextEncoder().encode('a'.repeat(64 * 1024));
  let sent = 0;
  return new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('{"key":"big","name":"'));
    },
    pull(controller) {
      if (sent >= bytes) {
        controller.enqueue(new TextEncoder().encode('"}'));
        controller.close();
        return;
      }
      controller.enqueue(chunk);
      sent += chunk.length;
    },
  });
}

describe('a body over the limit, sent with fetch', () => {
  for (const size of [2, 8, 64]) {
    it(`of ${size} MiB gets a readable 413 with the error body on every route, ${REPEATS} times each`, async () => {
      const body = JSON.stringify({ key: 'big', name: 'a'.repeat(size * MIB), kind: 'flag' });
      const outcomes: Record<string, string[]> = {};
      for (const target of targets) {
        for (let i = 0; i < REPEATS; i++) (outcomes[target.name] ??= []).push(await post(target, body));
      }
      const expected = Object.fromEntries(
        targets.map((t) => [t.name, Array<string>(REPEATS).fill('413 PAYLOAD_TOO_LARGE')]),
      );
      expect(outcomes).toEqual(expected);
    }, 120_000);
  }

  it('streamed without a Content-Length (8 MiB), gets the same 413', async () => {
    const outcomes: Record<string, string[]> = {};
    for (const target of targets) {
      for (let i = 0; i < REPEATS; i++)
        (outcomes[target.name] ??= []).push(await post(target, chunkedBody(8 * MIB)));
    }
    const expected = Object.fromEntries(
      targets.map((t) => [t.name, Array<string>(REPEATS).fill('413 PAYLOAD_TOO_LARGE')]),
    );
    expect(outcomes).toEqual(expected);
  }, 120_000);

  it('leaves both services answering ordinary requests', async () => {
    for (const base of [urls.gateway, urls.admin]) {
      const res = await fetch(`${base}/org/features`, { headers: org.headers });
      expect(res.status, base).toBe(200);
    }
  });
});

/** Resolves with everything the server sent once it closes the connection (or rejects after `ms`). */
/** Until the socket can take more, or is closed; both listeners go either way (one left per write added up). */
function drainedOrClosed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done).off('close', done);
      resolve();
    };
    socket.once('drain', done).once('close', done);
  });
}

function closedBy(socket: Socket, ms: number): Promise<string> {
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`still open after ${ms} ms: ${received.slice(0, 200)}`)),
      ms,
    );
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

describe('after an early 413, the connection', () => {
  it('is still closed when the client announces a huge body and stops sending', async () => {
    for (const base of [urls.gateway, urls.admin]) {
      const { hostname, port } = new URL(base);
      const socket = connect(Number(port), hostname);
      await new Promise((resolve) => socket.once('connect', resolve));
      const closed = closedBy(socket, LINGER_MS + 10_000);
      socket.write(
        `POST /console/api/sign-in HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${1024 * MIB}\r\n\r\n{"email":"`,
      );
      const received = await closed;
      expect(received, base).toMatch(/^HTTP\/1\.1 413 /);
      expect(received, base).toMatch(/\r\nconnection: close\r\n/i);
      expect(received, base).toContain('"code":"PAYLOAD_TOO_LARGE"');
    }
  }, 60_000);

  it('is closed after a bounded amount when the client keeps sending without reading', async () => {
    const chunk = Buffer.alloc(MIB, 'a');
    for (const base of [urls.gateway, urls.admin]) {
      const { hostname, port } = new URL(base);
      const socket = connect(Number(port), hostname);
      await new Promise((resolve) => socket.once('connect', resolve));
      const closed = closedBy(socket, LINGER_MS + 20_000);
      let open = true;
      socket.once('close', () => (open = false));
      socket.write(
        `POST /org/features HTTP/1.1\r\nHost: ${hostname}\r\nX-API-Key: ${org.api_key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${1024 * MIB}\r\n\r\n`,
      );
      let sentMiB = 0;
      // Far past LINGER_BYTES, bounded: the server must have closed the connection well before.
      while (open && sentMiB < 8 * (LINGER_BYTES / MIB)) {
        if (!socket.write(chunk)) await drainedOrClosed(socket);
        sentMiB += 1;
      }
      const received = await closed;
      expect(received, base).toMatch(/^HTTP\/1\.1 413 /);
      expect(sentMiB, base).toBeLessThan(8 * (LINGER_BYTES / MIB));
    }
  }, 90_000);
});
