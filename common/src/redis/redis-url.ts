import type { RedisOptions } from 'ioredis';
import type { Config } from '../config.ts';

export interface RedisNode {
  host: string;
  port: number;
}

/** Everything REDIS_URL (and REDIS_CLUSTER_NODES) say about where Redis is and how to log in to it. */
export interface RedisTarget {
  /** The one node of a single Redis, or the seed nodes of a cluster. */
  nodes: RedisNode[];
  cluster: boolean;
  username: string | undefined;
  password: string | undefined;
  /** Always 0 on a cluster (it has no other database). */
  db: number;
  tls: boolean;
}

/** REDIS_URL or REDIS_CLUSTER_NODES cannot be read; the message never contains the password. */
export class RedisUrlError extends Error {
  override name = 'RedisUrlError';
}

const DEFAULT_PORT = 6379;
const SHAPES =
  'redis://[user:password@]host[:port][/db], rediss://... (TLS), ' +
  'redis+cluster://[user:password@]host:port,host:port (or rediss+cluster://)';

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?([?#].*)?$/;

/** The URL with its password replaced, for messages and logs. */
export function redactRedisUrl(url: string): string {
  // Greedy up to the last '@', so a password with an unencoded '/' or '@' is hidden too.
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*:).*@/i, '$1***@');
}

function fail(url: string, problem: string): never {
  throw new RedisUrlError(`REDIS_URL ${JSON.stringify(redactRedisUrl(url))}: ${problem} (expected ${SHAPES})`);
}

function decoded(url: string, part: string, what: string): string | undefined {
  if (!part) return undefined;
  try {
    return decodeURIComponent(part);
  } catch {
    return fail(url, `the ${what} is not valid percent-encoding`);
  }
}

function portOf(url: string, raw: string): number {
  if (!raw) return DEFAULT_PORT;
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port < 1 || port > 65535) fail(url, `port ${raw} is not between 1 and 65535`);
  return port;
}

function dbOf(url: string, path: string): number {
  const digits = path.replace(/^\//, '');
  if (digits === '') return 0;
  if (!/^\d{1,5}$/.test(digits)) fail(url, `the database "${digits}" is not a number`);
  return Number(digits);
}

/** One `host[:port]`; IPv6 hosts in brackets. */
function nodeOf(url: string, hostPort: string): RedisNode {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d*))?$/.exec(hostPort.trim());
  if (!match) return fail(url, `"${hostPort}" is not host[:port]`);
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port: portOf(url, match[2] ?? '') };
}

function credentials(url: string, userinfo: string): Pick<RedisTarget, 'username' | 'password'> {
  const colon = userinfo.indexOf(':');
  const username = decoded(url, colon < 0 ? userinfo : userinfo.slice(0, colon), 'user name');
  const password = decoded(url, colon < 0 ? '' : userinfo.slice(colon + 1), 'password');
  // ioredis sends AUTH only with a password: a user alone would silently log in as `default`.
  if (username !== undefined && password === undefined) fail(url, `user "${username}" has no password`);
  return { username, password };
}

function parseClusterUrl(url: string, match: RegExpExecArray): RedisTarget {
  const [, scheme, userinfo = '', hosts = '', path = '', rest] = match;
  if (rest) fail(url, 'query parameters and fragments are not read');
  const db = dbOf(url, path);
  if (db !== 0) fail(url, 'a Redis Cluster has only database 0');
  const nodes = hosts.split(',').filter((node) => node.trim() !== '');
  if (nodes.length === 0) fail(url, 'no cluster node is named');
  return {
    nodes: nodes.map((node) => nodeOf(url, node)),
    cluster: true,
    ...credentials(url, userinfo),
    db,
    tls: scheme === 'rediss',
  };
}

/** Reads one REDIS_URL; throws RedisUrlError naming what is wrong. */
export function parseRedisUrl(url: string): RedisTarget {
  const cluster = CLUSTER_URL.exec(url.trim());
  if (cluster) return parseClusterUrl(url, cluster);
  if (!url.includes('://')) fail(url, 'no scheme');
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    return fail(url, 'not a URL');
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    fail(url, `scheme "${parsed.protocol}" is not redis:, rediss:, redis+cluster: or rediss+cluster:`);
  }
  if (!parsed.hostname) fail(url, 'no host');
  if (parsed.search || parsed.hash) fail(url, 'query parameters and fragments are not read');
  const userinfo = parsed.username + (parsed.password ? `:${parsed.password}` : '');
  return {
    nodes: [{ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: portOf(url, parsed.port) }],
    cluster: false,
    ...credentials(url, userinfo),
    db: dbOf(url, parsed.pathname),
    tls: parsed.protocol === 'rediss:',
  };
}

/**
 * The configured Redis. REDIS_CLUSTER_NODES, when set, names the cluster's seed nodes and REDIS_URL still
 * gives the user, password and TLS (its host is then not used): one place holds the credentials.
 */
export function redisTarget(config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>): RedisTarget {
  const target = parseRedisUrl(config.redisUrl);
  if (config.redisClusterNodes.length === 0) return target;
  if (target.db !== 0) fail(config.redisUrl, 'REDIS_CLUSTER_NODES is set, and a Redis Cluster has only database 0');
  const nodes = config.redisClusterNodes.map((node) => {
    try {
      return nodeOf(node, node);
    } catch {
      throw new RedisUrlError(`REDIS_CLUSTER_NODES: "${node}" is not host:port`);
    }
  });
  return { ...target, nodes, cluster: true };
}

/** ioredis options for one node of the target: credentials, database and TLS (host and port apart). */
export function nodeOptions(target: RedisTarget): Pick<RedisOptions, 'username' | 'password' | 'db' | 'tls'> {
  return {
    ...(target.username !== undefined && { username: target.username }),
    ...(target.password !== undefined && { password: target.password }),
    ...(target.db !== 0 && { db: target.db }),
    ...(target.tls && { tls: {} }),
  };
}
