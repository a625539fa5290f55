import { describe, expect, it } from 'vitest';
import {
  nodeOptions,
  parseRedisUrl,
  redactRedisUrl,
  redisTarget,
  RedisUrlError,
  type RedisTarget,
} from '@ent/common/redis/redis-url';

const single = (host: string, port: number, rest: Partial<RedisTarget> = {}): RedisTarget => ({
  nodes: [{ host, port }],
  cluster: false,
  username: undefined,
  password: undefined,
  db: 0,
  tls: false,
  ...rest,
});

describe('parseRedisUrl: every accepted shape', () => {
  const cases: [string, RedisTarget][] = [
    ['redis://127.0.0.1:6379', single('127.0.0.1', 6379)],
    ['redis://localhost', single('localhost', 6379)],
    ['redis://redis.internal:7000/', single('redis.internal', 7000)],
    ['redis://:s3cret@h:6380', single('h', 6380, { password: 's3cret' })],
    ['redis://alice:s3cret@h:6380', single('h', 6380, { username: 'alice', password: 's3cret' })],
    ['redis://alice:p%40ss%2Fw%3Ard@h', single('h', 6379, { username: 'alice', password: 'p@ss/w:rd' })],
    ['redis://h:6379/3', single('h', 6379, { db: 3 })],
    ['redis://alice:pw@h:1/15', single('h', 1, { username: 'alice', password: 'pw', db: 15 })],
    ['rediss://h', single('h', 6379, { tls: true })],
    ['rediss://:pw@cache.example.com:6380/2', single('cache.example.com', 6380, { password: 'pw', db: 2, tls: true })],
    ['redis://[::1]:6390', single('::1', 6390)],
    ['  redis://h:6379  ', single('h', 6379)],
    [
      'redis+cluster://h1:7000,h2:7001',
      { ...single('h1', 7000), nodes: [{ host: 'h1', port: 7000 }, { host: 'h2', port: 7001 }], cluster: true },
    ],
    [
      'redis+cluster://bob:pw@h1:7000,h2:7001,[::1]:7002',
      {
        ...single('h1', 7000, { username: 'bob', password: 'pw' }),
        nodes: [
          { host: 'h1', port: 7000 },
          { host: 'h2', port: 7001 },
          { host: '::1', port: 7002 },
        ],
        cluster: true,
      },
    ],
    [
      'rediss+cluster://:pw@h1:7000/0',
      { ...single('h1', 7000, { password: 'pw', tls: true }), cluster: true },
    ],
    ['redis+cluster://h1', { ...single('h1', 6379), cluster: true }],
  ];
  it.each(cases)('%s', (url, expected) => {
    expect(parseRedisUrl(url)).toEqual(expected);
  });
});

describe('parseRedisUrl: what it refuses, naming the problem and never the password', () => {
  const cases: [string, RegExp][] = [
    ['127.0.0.1:6379', /no scheme/],
    ['localhost', /no scheme/],
    ['', /no scheme/],
    ['redis://h:6379:1', /not a URL/],
    ['http://h:6379', /scheme "http:"/],
    ['redis://', /no host|not a URL/],
    ['redis://h:0', /port 0 is not between 1 and 65535/],
    ['redis://h:70000', /not a URL|port 70000/],
    ['redis://h/x', /database "x" is not a number/],
    ['redis://h/1/2', /database "1\/2" is not a number/],
    ['redis://h?db=2', /query parameters/],
    ['redis://alice@h', /user "alice" has no password/],
    ['redis://alice:@h', /user "alice" has no password/],
    ['redis://:%E0%A4%A@h', /password is not valid percent-encoding/],
    ['redis+cluster://', /no cluster node/],
    ['redis+cluster://h1:7000/1', /only database 0/],
    ['redis+cluster://h1:7000,h2:port', /"h2:port" is not host\[:port\]/],
    ['redis+cluster://:pw@h1:99999', /port 99999/],
    ['redis+cluster://h1:7000?x=1', /query parameters/],
  ];
  it.each(cases)('%j', (url, problem) => {
    let error: unknown;
    try {
      parseRedisUrl(url);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(RedisUrlError);
    expect((error as Error).message).toMatch(problem);
    expect((error as Error).message).toMatch(/^REDIS_URL .*expected redis:\/\//);
  });

  it('hides the password in the message, even one with unencoded / or @', () => {
    for (const url of ['redis://:hunter2@h:0', 'redis://u:hun/ter2@h', 'redis://u:hun@ter2@h/x']) {
      expect(() => parseRedisUrl(url)).toThrow(RedisUrlError);
      try {
        parseRedisUrl(url);
      } catch (error) {
        expect((error as Error).message).not.toContain('hunter2');
        expect((error as Error).message).not.toContain('ter2');
      }
    }
    expect(redactRedisUrl('redis://alice:pw@h:1/2')).toBe('redis://alice:***@h:1/2');
    expect(redactRedisUrl('redis+cluster://:pw@h1:1,h2:2')).toBe('redis+cluster://:***@h1:1,h2:2');
    expect(redactRedisUrl('redis://h:6379/0')).toBe('redis://h:6379/0');
  });
});

describe('redisTarget: REDIS_CLUSTER_NODES takes its login from REDIS_URL', () => {
  it('uses the listed nodes with the URL user, password and TLS', () => {
    expect(
      redisTarget({ redisUrl: 'rediss://carol:pw@ignored:1', redisClusterNodes: ['n1:7000', 'n2:7001'] }),
    ).toEqual({
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
      ],
      cluster: true,
      username: 'carol',
      password: 'pw',
      db: 0,
      tls: true,
    });
  });

  it('is the URL alone when no nodes are listed', () => {
    expect(redisTarget({ redisUrl: 'redis://h:1/4', redisClusterNodes: [] })).toEqual(single('h', 1, { db: 4 }));
  });

  it('refuses a database index or an unreadable node with a cluster', () => {
    expect(() => redisTarget({ redisUrl: 'redis://h/2', redisClusterNodes: ['n1:7000'] })).toThrow(/only database 0/);
    expect(() => redisTarget({ redisUrl: 'redis://h', redisClusterNodes: ['n1:x'] })).toThrow(
      /REDIS_CLUSTER_NODES: "n1:x" is not host:port/,
    );
  });
});

describe('nodeOptions', () => {
  it('passes only what the URL says', () => {
    expect(nodeOptions(single('h', 1))).toEqual({});
    expect(nodeOptions(single('h', 1, { username: 'u', password: 'p', db: 2, tls: true }))).toEqual({
      username: 'u',
      password: 'p',
      db: 2,
      tls: {},
    });
  });
});
