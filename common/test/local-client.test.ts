import Fastify, { type FastifyServerOptions } from 'fastify';
import { describe, expect, it } from 'vitest';
import {
  failureLimitAddress,
  isFailureLimitAddress,
  isLocalClient,
  isLocalDirectPeer,
  unstatedFailureLimitAddress,
} from '@ent/common/http/local-client';

async function seen(
  trustProxy: FastifyServerOptions['trustProxy'],
  remoteAddress: string,
  headers: Record<string, string> = {},
) {
  const app = Fastify({ trustProxy });
  app.get('/', async (request) => ({
    direct: isLocalDirectPeer(request),
    local: isLocalClient(request),
    bucket: failureLimitAddress(request),
  }));
  try {
    return (await app.inject({ method: 'GET', url: '/', remoteAddress, headers })).json();
  } finally {
    await app.close();
  }
}

describe('who is a client on this machine', () => {
  it('a process on this machine talking directly: local, its own exempt address', async () => {
    expect(await seen(false, '127.0.0.1')).toEqual({ direct: true, local: true, bucket: '127.0.0.1' });
    expect(await seen(false, '::1')).toEqual({ direct: true, local: true, bucket: '::1' });
  });

  it('a proxy on this machine the settings do not trust: its clients share one limited bucket', async () => {
    for (const header of ['x-forwarded-for', 'x-real-ip', 'x-forwarded-proto', 'forwarded', 'via']) {
      expect(await seen(false, '127.0.0.1', { [header]: '203.0.113.5' }), header).toEqual({
        direct: false,
        local: false,
        bucket: 'relayed-by:127.0.0.1',
      });
    }
  });

  it('a local caller through the gateway, at admin (trusted loopback proxy): local, but not direct', async () => {
    expect(await seen(['127.0.0.1'], '127.0.0.1', { 'x-forwarded-for': '127.0.0.1' })).toEqual({
      direct: false,
      local: true,
      bucket: '127.0.0.1',
    });
  });

  it('a remote caller through a trusted proxy is limited by its own address', async () => {
    expect(await seen(['127.0.0.1'], '127.0.0.1', { 'x-forwarded-for': '203.0.113.5' })).toEqual({
      direct: false,
      local: false,
      bucket: '203.0.113.5',
    });
    expect(await seen(false, '198.51.100.7')).toEqual({
      direct: false,
      local: false,
      bucket: '198.51.100.7',
    });
  });

  it('a trusted proxy elsewhere naming a loopback client gets no exemption', async () => {
    for (const named of ['127.0.0.1', '::ffff:127.0.0.1']) {
      const result = await seen(['10.0.0.0/8'], '10.1.2.3', { 'x-forwarded-for': named });
      expect(result.local, named).toBe(false);
      expect(result.bucket, named).toMatch(/^relayed-by:/);
    }
  });
});

describe("admin's bucket for a request with no statement from a gateway it believes", () => {
  async function unstated(remoteAddress: string, headers: Record<string, string> = {}) {
    // Admin's default TRUSTED_PROXIES.
    const app = Fastify({ trustProxy: ['127.0.0.1', '::1', '::ffff:127.0.0.1'] });
    app.get('/', async (request) => ({ bucket: unstatedFailureLimitAddress(request) }));
    try {
      return (await app.inject({ method: 'GET', url: '/', remoteAddress, headers })).json().bucket;
    } finally {
      await app.close();
    }
  }

  it("exempts only a direct peer on this machine; a client relayed from loopback shares its relay's bucket", async () => {
    expect(await unstated('127.0.0.1')).toBe('127.0.0.1');
    expect(await unstated('127.0.0.1', { 'x-forwarded-for': '127.0.0.1' })).toBe('relayed-by:127.0.0.1');
    expect(await unstated('127.0.0.1', { via: '1.1 nginx' })).toBe('relayed-by:127.0.0.1');
    expect(await unstated('127.0.0.1', { 'x-forwarded-for': '203.0.113.5' })).toBe('203.0.113.5');
    expect(await unstated('198.51.100.7', { 'x-forwarded-for': '127.0.0.1' })).toBe('198.51.100.7');
  });

  it('reads statements as the values failureLimitAddress gives, nothing else', () => {
    for (const value of [
      '127.0.0.1',
      '203.0.113.5',
      '2001:db8::1',
      'relayed-by:127.0.0.1',
      'relayed-by:::1',
    ]) {
      expect(isFailureLimitAddress(value), value).toBe(true);
    }
    for (const value of [
      '',
      'localhost',
      'relayed-by:',
      'relayed-by:x',
      '127.0.0.1, 10.0.0.1',
      'x'.repeat(5000),
    ]) {
      expect(isFailureLimitAddress(value), value).toBe(false);
    }
  });
});
