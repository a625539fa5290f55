import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/app.ts';
import { INTERNAL_TOKEN_REQUIRED } from '../../src/plugins/internal-access.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';

const TOKEN = 'internal-token-0123456789abcdef';
const ROUTE = '/internal/snapshots/organization';

let withToken: AdminTestContext;
let withoutToken: AdminTestContext;
let org: TestOrganization;

beforeAll(async () => {
  withToken = await createAdminContext({ config: { internalToken: TOKEN } });
  withoutToken = await createAdminContext({ config: { internalToken: '' } });
  org = await createTestOrganization(withToken.db, 'Internal routes org');
  await withToken.app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await withToken?.close();
  await withoutToken?.close();
});

const internalCall = (ctx: AdminTestContext, headers: Record<string, string>, remoteAddress?: string) =>
  ctx.app.inject({
    method: 'POST',
    url: ROUTE,
    headers,
    payload: { organization_id: org?.organization_id ?? 'org_none' },
    ...(remoteAddress ? { remoteAddress } : {}),
  });

/** Raw bytes on a socket: a client library would refuse (or re-encode) a header that is not Latin-1. */
function rawRequest(port: number, tokenBytes: Buffer): Promise<string> {
  const body = Buffer.from(JSON.stringify({ organization_id: org.organization_id }));
  const head = Buffer.from(
    `POST ${ROUTE} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\nx-internal-token: `,
  );
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    socket.write(Buffer.concat([head, tokenBytes, Buffer.from('\r\n\r\n'), body]));
  });
}

describe('admin /internal routes with INTERNAL_TOKEN set', () => {
  it('answers the gateway that presents the token', async () => {
    const res = await internalCall(withToken, { 'x-internal-token': TOKEN });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toHaveProperty('catalog');
  });

  it.each([
    ['missing', {}],
    ['wrong, same length', { 'x-internal-token': TOKEN.replace(/.$/, 'X') }],
    ['a prefix of it', { 'x-internal-token': TOKEN.slice(0, 10) }],
    ['longer', { 'x-internal-token': `${TOKEN}0` }],
    ['empty', { 'x-internal-token': '' }],
  ])('a %s token is 404, exactly like a route that does not exist', async (_name, headers) => {
    const res = await internalCall(withToken, headers);
    expect(res.statusCode).toBe(404);
    const unknown = await withToken.app.inject({ method: 'POST', url: '/internal/snapshots/no-such-route' });
    expect(res.json().error.code).toBe('NOT_FOUND');
    expect(res.json().error.message).toBe(`No route POST ${ROUTE}.`);
    expect(unknown.json().error.code).toBe('NOT_FOUND');
  });

  it('a token in multi-byte UTF-8 or other non-ASCII bytes is 404, never 500', async () => {
    const { port } = withToken.app.server.address() as AddressInfo;
    const sameCharacterCount = Buffer.from(`${TOKEN.slice(0, -1)}é`, 'utf8');
    // Same byte length as the token: Node reads it as Latin-1, a string of the same length whose UTF-8 is longer
    // (what made a length check on characters plus timingSafeEqual on bytes throw).
    const sameByteLength = Buffer.from(`${TOKEN.slice(0, -2)}é`, 'utf8');
    const rawBytes = Buffer.concat([Buffer.from(TOKEN.slice(0, -2)), Buffer.from([0xff, 0xfe])]);
    expect(sameByteLength.length).toBe(Buffer.byteLength(TOKEN));
    for (const token of [sameCharacterCount, sameByteLength, rawBytes]) {
      const answer = await rawRequest(port, token);
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 404 Not Found');
    }
    // The connection survived: the right token on a raw socket still answers.
    expect((await rawRequest(port, Buffer.from(TOKEN))).split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });
});

describe('admin /internal routes without INTERNAL_TOKEN (loopback HOST)', () => {
  it('answers loopback peers, and is 404 to any other peer (even one claiming loopback in X-Forwarded-For)', async () => {
    const local = await createTestOrganization(withoutToken.db, 'Loopback org');
    const call = (remoteAddress: string, headers: Record<string, string> = {}) =>
      withoutToken.app.inject({
        method: 'POST',
        url: ROUTE,
        headers,
        payload: { organization_id: local.organization_id },
        remoteAddress,
      });
    for (const address of ['127.0.0.1', '127.3.4.5', '::1', '::ffff:127.0.0.1']) {
      expect((await call(address)).statusCode, address).toBe(200);
    }
    for (const address of ['10.0.0.7', '203.0.113.9', '::ffff:10.0.0.7', 'fd00::1']) {
      const res = await call(address, { 'x-forwarded-for': '127.0.0.1' });
      expect(res.statusCode, address).toBe(404);
      expect(res.json().error.code).toBe('NOT_FOUND');
    }
  });

  it('refuses to build on a non-loopback HOST, saying to set INTERNAL_TOKEN', async () => {
    const config = { ...withoutToken.config, host: '0.0.0.0', internalToken: '' };
    await expect(buildAdminApp({ config, db: withoutToken.db, redis: withoutToken.redis, logger: false })).rejects.toThrow(INTERNAL_TOKEN_REQUIRED('0.0.0.0'));
  });
});
