import { secretsKeyringFromEnv, type SecretsKeyring } from './crypto/keyring.ts';
import type { PublicPortMetrics } from './http/public-port-metrics.ts';

/** One validated configuration object, read from the environment once per process. */
export interface Config {
  databaseUrl: string;
  databaseOwnerUrl: string;
  redisUrl: string;
  /** host:port list; when set, Redis is used as a cluster (also implied by a redis+cluster:// URL). */
  redisClusterNodes: string[];
  /** How long a Redis command may take before it fails (a hung Redis becomes an error, not a hang). */
  redisCommandTimeoutMs: number;
  /** Prepended to every Redis key and BullMQ queue, so several deployments (or test files) share one Redis. */
  redisKeyPrefix: string;
  host: string;
  gatewayPort: number;
  adminPort: number;
  adminUrl: string;
  logLevel: string;
  /** Addresses whose X-Forwarded-For admin believes (the gateways in front of it). */
  trustedProxies: string[];
  /** Load balancers in front of the gateway whose X-Forwarded-For it believes; none by default. */
  gatewayTrustedProxies: string[];
  /** Lets webhook deliveries reach loopback and private addresses (tests, local development). */
  webhookAllowPrivateTargets: boolean;
  /**
   * Keyring encrypting webhook secrets and invite links at rest: SECRETS_KEY (32 bytes, hex or base64) is current,
   * SECRETS_KEY_PREVIOUS (comma-separated) still decrypt. Admin, worker and entctl assert it usable at startup.
   */
  secretsKey: SecretsKeyring;
  /**
   * Shared secret gateways present on admin's /internal routes. Empty: only loopback peers reach them, and admin
   * refuses to listen on a non-loopback HOST.
   */
  internalToken: string;
  bodyLimitBytes: number;
  /**
   * How long the gateways gather their last metered figures into a Redis that came back empty before metered answers
   * resume (503 with Retry-After meanwhile); 0 resumes at once, with only the first gateway's figures and Postgres's.
   */
  meteredRefillGatherMs: number;
  /** Bulk imports: how long a silent process keeps an import before another resumes it, and lines per batch. */
  imports: { leaseMs: number; batchSize: number };
  /**
   * Memory each gateway gives its subscriber cache, in MiB of estimated heap (least recently used go first);
   * catalogs get an eighth of it on top. About 250 bytes a subscriber without overrides.
   */
  gatewayCacheBytes: number;
  /** Per-organization catalog size limits: features, plans (archived included) and plan grants in all. */
  catalogLimits: { features: number; plans: number; grants: number };
  /**
   * Base URL of the console, where invite links point (`<consoleUrl>/join/<token>`). Null when CONSOLE_URL is
   * unset: a link then points at `/console` on the host the request that shows it reached (the gateway's, as it
   * forwards it), since a fixed `localhost` default opens nowhere but on the gateway's own machine.
   */
  consoleUrl: string | null;
  /** A console session's lifetime in hours, absolute from sign-in (the cookie's Max-Age). */
  consoleSessionHours: number;
  /** Console sign-ups (new organizations) one client address may make per hour. */
  consoleSignUpsPerHour: number;
  /**
   * log2 of scrypt's N for new console password hashes (PASSWORD_HASH_COST, default 15). Below 15 only under
   * NODE_ENV=test: tests sign in hundreds of times and need a cheap hash, a deployment never does.
   */
  passwordHashCost: number;
  /** After SIGTERM/SIGINT, how long /readyz answers 503 while requests are still served, so balancers stop sending. */
  shutdownDrainDelayMs: number;
  /** Hard limit from the signal to the exit: what has not finished by then is abandoned and the exit code is 1. */
  shutdownTimeoutMs: number;
  /** Failed key lookups allowed per client address (IPv6: per /64) a minute, as a burst too; 0 = no limit. */
  authFailuresPerMinute: number;
  /** Whether clients on this machine (loopback addresses) are limited too; by default they are not. */
  authFailuresLimitLoopback: boolean;
  /**
   * The operations port: `/metrics` and the detailed `/readyz` (gateway; admin uses adminMetricsPort). 0 (the
   * default) = not served, so two processes on one host never collide; deploy/ sets 9464 and 9465.
   */
  gatewayMetricsPort: number;
  adminMetricsPort: number;
  /** Address the metrics port binds (the public port's HOST by default). */
  metricsHost: string;
  /**
   * `/metrics` on the public ports (DESIGN.md §4): `loopback` answers this machine's direct peers only (`npm start`
   * and `npm run gateway`/`admin` set it), never a request relayed by a proxy; `off` (default: a proxy adding no header would look local)
   * answers nobody there. The operations port is unaffected.
   */
  publicPortMetrics: PublicPortMetrics;
  /** Browser origins allowed to call the gateway's OFREP routes (CORS); `*` = any; none by default. */
  ofrepCorsOrigins: string[];
}

type Env = Record<string, string | undefined>;

/** An integer variable within [min, max], or `fallback` when unset; anything else stops the process at startup. */
const integerIn = (
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max: number,
  what: string,
): number => {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be ${what}, got "${raw}"`);
  }
  return value;
};

const port = (env: Env, name: string, fallback: number) =>
  integerIn(env, name, fallback, 0, 65535, 'a TCP port (0-65535)');
const positiveInteger = (env: Env, name: string, fallback: number) =>
  integerIn(env, name, fallback, 1, Number.MAX_SAFE_INTEGER, 'a positive integer');

const oneOf = <T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T => {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if ((allowed as readonly string[]).includes(raw)) return raw as T;
  throw new Error(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
};

const list = (raw: string | undefined): string[] =>
  (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** The production cost: docs/console-api.md, N=2^15. */
export const STRONG_PASSWORD_HASH_COST = 15;
/** 2^17 · r=8 · 128 bytes = 128 MiB per hash, the most a sign-in may allocate (passwords.ts' ceiling is 256). */
const MAX_PASSWORD_HASH_COST = 17;

/** A cheap cost is refused at startup unless the process says it runs tests, so no deployment gets one by mistake. */
function passwordHashCost(env: Env): number {
  const cost = integerIn(
    env,
    'PASSWORD_HASH_COST',
    STRONG_PASSWORD_HASH_COST,
    1,
    MAX_PASSWORD_HASH_COST,
    `an integer between 1 and ${MAX_PASSWORD_HASH_COST} (log2 of scrypt's N)`,
  );
  if (cost < STRONG_PASSWORD_HASH_COST && env.NODE_ENV !== 'test') {
    throw new Error(
      `PASSWORD_HASH_COST below ${STRONG_PASSWORD_HASH_COST} is for tests only (NODE_ENV=test), got "${env.PASSWORD_HASH_COST}" ` +
        `with NODE_ENV "${env.NODE_ENV ?? ''}"; unset it to use the default`,
    );
  }
  return cost;
}

export function loadConfig(env: Env = process.env): Config {
  const adminPort = port(env, 'ADMIN_PORT', 3001);
  const host = env.HOST || '127.0.0.1';
  const gatewayPort = port(env, 'GATEWAY_PORT', 3000);
  const shutdownTimeoutMs = integerIn(
    env,
    'SHUTDOWN_TIMEOUT_MS',
    10_000,
    1,
    3_600_000,
    'milliseconds between 1 and 3600000',
  );
  return {
    databaseUrl: env.DATABASE_URL || 'postgres://entitlements_app@127.0.0.1:5432/entitlements',
    databaseOwnerUrl: env.DATABASE_OWNER_URL || 'postgres://postgres@127.0.0.1:5432/entitlements',
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    redisClusterNodes: list(env.REDIS_CLUSTER_NODES),
    redisKeyPrefix: env.REDIS_KEY_PREFIX || 'ent',
    redisCommandTimeoutMs: positiveInteger(env, 'REDIS_COMMAND_TIMEOUT_MS', 1000),
    host,
    gatewayPort,
    adminPort,
    adminUrl: env.ADMIN_URL || `http://127.0.0.1:${adminPort}`,
    logLevel: env.LOG_LEVEL || 'info',
    trustedProxies: list(env.TRUSTED_PROXIES || '127.0.0.1,::1,::ffff:127.0.0.1'),
    gatewayTrustedProxies: list(env.GATEWAY_TRUSTED_PROXIES),
    webhookAllowPrivateTargets: env.WEBHOOK_ALLOW_PRIVATE_TARGETS === 'true',
    secretsKey: secretsKeyringFromEnv(env, host),
    internalToken: env.INTERNAL_TOKEN || '',
    bodyLimitBytes: positiveInteger(env, 'BODY_LIMIT_BYTES', 1024 * 1024),
    meteredRefillGatherMs: integerIn(
      env,
      'METERED_REFILL_GATHER_MS',
      3000,
      0,
      60_000,
      'milliseconds between 0 and 60000',
    ),
    imports: {
      leaseMs: integerIn(env, 'IMPORT_LEASE_MS', 30_000, 1000, 3_600_000, 'milliseconds between 1000 and 3600000'),
      batchSize: integerIn(env, 'IMPORT_BATCH_SIZE', 5000, 1, 10_000, 'an integer between 1 and 10000'),
    },
    gatewayCacheBytes:
      integerIn(env, 'GATEWAY_CACHE_MB', 512, 1, 1_048_576, 'MiB between 1 and 1048576') * 1024 * 1024,
    catalogLimits: {
      features: integerIn(env, 'CATALOG_MAX_FEATURES', 1000, 1, 100_000, 'an integer between 1 and 100000'),
      plans: integerIn(env, 'CATALOG_MAX_PLANS', 500, 1, 100_000, 'an integer between 1 and 100000'),
      grants: integerIn(
        env,
        'CATALOG_MAX_GRANTS',
        25_000,
        1,
        10_000_000,
        'an integer between 1 and 10000000',
      ),
    },
    consoleUrl: env.CONSOLE_URL || null,
    consoleSessionHours: integerIn(env, 'CONSOLE_SESSION_HOURS', 12, 1, 720, 'hours between 1 and 720'),
    consoleSignUpsPerHour: integerIn(
      env,
      'CONSOLE_SIGN_UPS_PER_HOUR',
      10,
      0,
      1_000_000,
      'an integer between 0 and 1000000',
    ),
    passwordHashCost: passwordHashCost(env),
    // Below the timeout, so a drain always leaves time to close.
    shutdownDrainDelayMs: integerIn(
      env,
      'SHUTDOWN_DRAIN_DELAY_MS',
      0,
      0,
      shutdownTimeoutMs - 1,
      'milliseconds below SHUTDOWN_TIMEOUT_MS',
    ),
    shutdownTimeoutMs,
    authFailuresPerMinute: integerIn(
      env,
      'AUTH_FAILURES_PER_MINUTE',
      30,
      0,
      1_000_000,
      'an integer between 0 and 1000000',
    ),
    authFailuresLimitLoopback: env.AUTH_FAILURES_LIMIT_LOOPBACK === 'true',
    gatewayMetricsPort: port(env, 'GATEWAY_METRICS_PORT', 0),
    adminMetricsPort: port(env, 'ADMIN_METRICS_PORT', 0),
    metricsHost: env.METRICS_HOST || env.HOST || '127.0.0.1',
    publicPortMetrics: oneOf(env, 'PUBLIC_PORT_METRICS', ['loopback', 'off'] as const, 'off'),
    ofrepCorsOrigins: list(env.OFREP_CORS_ORIGINS),
  };
}
