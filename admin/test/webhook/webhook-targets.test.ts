import { describe, expect, it } from 'vitest';
import {
  REFUSED_IPV4,
  REFUSED_IPV6,
  TARGET_REFUSED_MESSAGE,
  TargetRefusedError,
  assertPublicTarget,
  embeddedIPv4,
  isPrivateAddress,
  withoutAddresses,
} from '../../src/features/webhook/targets.ts';
import { validateWebhookUrl } from '../../src/features/webhook/service.ts';

/** Each refused range: its first and last address are refused, the addresses just outside are not. */
const IPV4_BOUNDARIES: [
  range: string,
  first: string,
  last: string,
  before: string | null,
  after: string | null,
][] = [
  ['0.0.0.0/8', '0.0.0.0', '0.255.255.255', null, '1.0.0.0'],
  ['10.0.0.0/8', '10.0.0.0', '10.255.255.255', '9.255.255.255', '11.0.0.0'],
  ['100.64.0.0/10', '100.64.0.0', '100.127.255.255', '100.63.255.255', '100.128.0.0'],
  ['127.0.0.0/8', '127.0.0.0', '127.255.255.255', '126.255.255.255', '128.0.0.0'],
  ['169.254.0.0/16', '169.254.0.0', '169.254.255.255', '169.253.255.255', '169.255.0.0'],
  ['172.16.0.0/12', '172.16.0.0', '172.31.255.255', '172.15.255.255', '172.32.0.0'],
  ['192.0.0.0/24', '192.0.0.0', '192.0.0.255', '191.255.255.255', '192.0.1.0'],
  ['192.0.2.0/24', '192.0.2.0', '192.0.2.255', '192.0.1.255', '192.0.3.0'],
  ['192.88.99.0/24', '192.88.99.0', '192.88.99.255', '192.88.98.255', '192.88.100.0'],
  ['192.168.0.0/16', '192.168.0.0', '192.168.255.255', '192.167.255.255', '192.169.0.0'],
  ['198.18.0.0/15', '198.18.0.0', '198.19.255.255', '198.17.255.255', '198.20.0.0'],
  ['198.51.100.0/24', '198.51.100.0', '198.51.100.255', '198.51.99.255', '198.51.101.0'],
  ['203.0.113.0/24', '203.0.113.0', '203.0.113.255', '203.0.112.255', '203.0.114.0'],
  ['224.0.0.0/4', '224.0.0.0', '239.255.255.255', '223.255.255.255', null],
  ['240.0.0.0/4', '240.0.0.0', '255.255.255.255', null, null],
];

const IPV6_BOUNDARIES: [
  range: string,
  first: string,
  last: string,
  before: string | null,
  after: string | null,
][] = [
  ['::/96 (IPv4-compatible, :: and ::1)', '::', '::ffff:ffff', null, null],
  ['::ffff:0:0/96 of a private IPv4', '::ffff:0.0.0.0', '::ffff:127.255.255.255', null, null],
  ['64:ff9b::/96 (NAT64)', '64:ff9b::', '64:ff9b::ffff:ffff', null, null],
  ['64:ff9b:1::/48 (local NAT64)', '64:ff9b:1::', '64:ff9b:1:ffff:ffff:ffff:ffff:ffff', null, null],
  ['100::/64 (discard)', '100::', '100::ffff:ffff:ffff:ffff', null, null],
  [
    '2001::/32 (Teredo)',
    '2001::',
    '2001:0:ffff:ffff:ffff:ffff:ffff:ffff',
    '2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:1::',
  ],
  [
    '2001:2::/48 (benchmarking)',
    '2001:2::',
    '2001:2:0:ffff:ffff:ffff:ffff:ffff',
    '2001:1:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:2:1::',
  ],
  [
    '2001:10::/28 (ORCHID)',
    '2001:10::',
    '2001:1f:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:f:ffff:ffff:ffff:ffff:ffff:ffff',
    null,
  ],
  ['2001:20::/28 (ORCHIDv2)', '2001:20::', '2001:2f:ffff:ffff:ffff:ffff:ffff:ffff', null, '2001:30::'],
  [
    '2001:db8::/32 (documentation)',
    '2001:db8::',
    '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:db9::',
  ],
  [
    '2002::/16 (6to4)',
    '2002::',
    '2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    '2003::',
  ],
  [
    '3fff::/20 (documentation)',
    '3fff::',
    '3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff',
    '3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
    null,
  ],
  ['5f00::/16 (SRv6)', '5f00::', '5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, null],
  ['fc00::/7 (unique local)', 'fc00::', 'fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, null],
  ['fe80::/10 (link-local)', 'fe80::', 'febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, null],
  ['fec0::/10 (site-local)', 'fec0::', 'feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, null],
  ['ff00::/8 (multicast)', 'ff00::', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', null, null],
  ['outside 2000::/3, below', '1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '1::', null, '2000::'],
  ['outside 2000::/3, above', '4000::', '4000::1', '3fff:1000::', null],
];

describe('isPrivateAddress', () => {
  it.each(IPV4_BOUNDARIES)(
    'IPv4 %s: refuses %s and %s, allows the neighbours',
    (_range, first, last, before, after) => {
      expect(isPrivateAddress(first)).toBe(true);
      expect(isPrivateAddress(last)).toBe(true);
      if (before) expect(isPrivateAddress(before)).toBe(false);
      if (after) expect(isPrivateAddress(after)).toBe(false);
    },
  );

  it.each(IPV6_BOUNDARIES)(
    'IPv6 %s: refuses %s and %s, allows the neighbours',
    (_range, first, last, before, after) => {
      expect(isPrivateAddress(first)).toBe(true);
      expect(isPrivateAddress(last)).toBe(true);
      if (before) expect(isPrivateAddress(before)).toBe(false);
      if (after) expect(isPrivateAddress(after)).toBe(false);
    },
  );

  it('tests every listed range', () => {
    const tested = [...IPV4_BOUNDARIES, ...IPV6_BOUNDARIES].map(([range]) => range);
    for (const [network, prefix] of [...REFUSED_IPV4, ...REFUSED_IPV6]) {
      expect(
        tested.some((range) => range.startsWith(`${network}/${prefix}`)),
        `${network}/${prefix}`,
      ).toBe(true);
    }
  });

  it.each([
    ['::ffff:127.0.0.1', true],
    ['::ffff:7f00:1', true],
    ['::FFFF:10.1.2.3', true],
    ['::ffff:169.254.169.254', true],
    ['::ffff:0:127.0.0.1', true],
    ['::ffff:0:192.168.1.1', true],
    ['0:0:0:0:0:ffff:c0a8:101', true],
    ['::127.0.0.1', true],
    ['::8.8.8.8', true],
    ['64:ff9b::8.8.8.8', true],
    ['64:ff9b::10.0.0.1', true],
    ['2002:7f00:1::', true],
    ['2002:808:808::1', true],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', true],
    ['::ffff:8.8.8.8', false],
    ['::ffff:0:8.8.8.8', false],
  ] as const)('judges %s by the IPv4 address it carries or its range: refused=%s', (address, refused) => {
    expect(isPrivateAddress(address)).toBe(refused);
  });

  it.each(['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888'])(
    'allows the public address %s',
    (address) => expect(isPrivateAddress(address)).toBe(false),
  );

  it.each(['', 'localhost', 'example.com', '256.0.0.1', '1.2.3', 'fe80::1%eth0x::', ':::1'])(
    'refuses %j, which is not an IP address',
    (value) => expect(isPrivateAddress(value)).toBe(true),
  );

  it('refuses a link-local address with a zone id', () => {
    expect(isPrivateAddress('fe80::1%eth0')).toBe(true);
  });
});

describe('embeddedIPv4', () => {
  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::ffff:0:10.0.0.1', '10.0.0.1'],
    ['::192.168.0.1', '192.168.0.1'],
    ['64:ff9b::7f00:1', '127.0.0.1'],
    ['2002:c0a8:101::1', '192.168.1.1'],
    ['2001:4860::1', null],
    ['64:ff9b:1::7f00:1', null],
  ] as const)('%s carries %s', (address, ipv4) => expect(embeddedIPv4(address)).toBe(ipv4));
});

describe('assertPublicTarget', () => {
  it('refuses an address literal without naming it', async () => {
    for (const url of ['http://127.0.0.1/', 'http://[::ffff:127.0.0.1]/', 'https://[2002:a00:1::]:8443/x']) {
      const error = await assertPublicTarget(new URL(url)).catch((caught: unknown) => caught);
      expect(error, url).toBeInstanceOf(TargetRefusedError);
      expect((error as Error).message).toBe(TARGET_REFUSED_MESSAGE);
      expect((error as Error).message).not.toMatch(/\d+\.\d+|::/);
    }
  });

  it('refuses a name that resolves to loopback (localhost, through the system resolver)', async () => {
    await expect(assertPublicTarget(new URL('http://localhost:1/'))).rejects.toBeInstanceOf(
      TargetRefusedError,
    );
  });

  it.each(['http://localhost./', 'http://foo.localhost/', 'https://a.b.LOCALHOST.:8443/x'])(
    'refuses %s by its name alone, even where no resolver knows it (RFC 6761)',
    async (url) => {
      const resolveAll = async () => [{ address: '8.8.8.8', family: 4 }];
      await expect(assertPublicTarget(new URL(url), { resolveAll })).rejects.toBeInstanceOf(TargetRefusedError);
    },
  );

  it('refuses when any one of the addresses a name has is private', async () => {
    const resolveAll = async () => [
      { address: '8.8.8.8', family: 4 },
      { address: '10.0.0.7', family: 4 },
    ];
    await expect(assertPublicTarget(new URL('http://mixed.test/'), { resolveAll })).rejects.toBeInstanceOf(
      TargetRefusedError,
    );
    await expect(
      assertPublicTarget(new URL('http://public.test/'), {
        resolveAll: async () => [{ address: '8.8.4.4', family: 4 }],
      }),
    ).resolves.toBeUndefined();
  });

  it('stops waiting for DNS when the signal aborts (the delivery timeout bounds the lookup)', async () => {
    const hanging = () => new Promise<never>(() => undefined);
    const started = Date.now();
    const error = await assertPublicTarget(new URL('http://slow.test/'), {
      resolveAll: hanging,
      signal: AbortSignal.timeout(50),
    }).catch((caught: unknown) => caught);
    expect((error as Error).name).toBe('TimeoutError');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('does not even start a lookup under a signal that already aborted (none is left to fail unwatched)', async () => {
    let lookups = 0;
    const resolveAll = async () => {
      lookups += 1;
      throw new Error('getaddrinfo ENOTFOUND hooks.example.invalid');
    };
    await expect(
      assertPublicTarget(new URL('http://hooks.example.invalid/'), { signal: AbortSignal.abort(), resolveAll }),
    ).rejects.toMatchObject({ name: 'AbortError' });
    expect(lookups).toBe(0);
  });
});

describe('withoutAddresses', () => {
  it.each([
    ['connect ECONNREFUSED 127.0.0.1:4000', 'connect ECONNREFUSED <address>'],
    ['connect ETIMEDOUT 10.1.2.3:443', 'connect ETIMEDOUT <address>'],
    ['connect ECONNREFUSED ::1:8080', 'connect ECONNREFUSED <address>'],
    ['connect EHOSTUNREACH fd00::1:2', 'connect EHOSTUNREACH <address>'],
    ['connect ECONNREFUSED [fe80::1%eth0]:80', 'connect ECONNREFUSED <address>'],
    ['connect ECONNREFUSED ::ffff:192.168.0.1:80', 'connect ECONNREFUSED <address>'],
    ['getaddrinfo ENOTFOUND hooks.example.com', 'getaddrinfo ENOTFOUND hooks.example.com'],
    ['endpoint answered 500', 'endpoint answered 500'],
  ])('%j becomes %j', (message, expected) => expect(withoutAddresses(message)).toBe(expected));
});

describe('PUT /org/webhook validation (validateWebhookUrl)', () => {
  it.each([
    'http://[::ffff:127.0.0.1]/hook',
    'http://[::127.0.0.1]/hook',
    'http://[2002:7f00:1::]/hook',
    'http://[64:ff9b::a9fe:a9fe]/hook',
    'http://[64:ff9b:1::1]/hook',
    'http://[2001::1]/hook',
    'http://[fec0::1]/hook',
    'http://localhost/hook',
  ])('refuses %s with a validation error', async (url) => {
    await expect(validateWebhookUrl(url, false)).rejects.toMatchObject({
      status: 422,
      message: 'url points at a private or loopback address.',
    });
  });

  it('accepts a public address literal', async () => {
    await expect(validateWebhookUrl('https://[2606:4700:4700::1111]/hook', false)).resolves.toBe(
      'https://[2606:4700:4700::1111]/hook',
    );
  });
});
