import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRedisLogin, RedisLoginError } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { freePort, start, startNode, waitFor, type Started } from '../../../gateway/test/processes.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
} from '../../../test-support/admin-context.ts';
import { auditSettleJob } from '../../src/features/audit/settle.job.ts';
import type { AnyJobDefinition, JobDependencies } from '../../src/jobs/job.ts';
import { jobDefinitions } from '../../src/job-registry.ts';
import type { QueueName } from '../../src/jobs/queues.ts';
import { startWorkers } from '../../src/jobs/start-workers.ts';
import { caller } from '../../../test-support/identity-context.ts';

const ACL_PASSWORD = 'alice-secret-pw';
const REQUIRED_PASSWORD = 'required-secret-pw';

/** A throwaway redis-server of this test; `args` add the login it demands. */
function redisServer(port: number, args: string[]): Started {
  return start(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...args],
    {},
  );
}

async function untilPong(url: string): Promise<void> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await waitFor(async () => {
      if (probe.status !== 'ready') await probe.connect().catch(() => {});
      return (await probe.ping()) === 'PONG';
    }, `redis at ${url.replace(/:[^:@]*@/, ':***@')}`);
  } finally {
    probe.disconnect();
  }
}

let aclPort: number;
let aclRedis: Started;
let aclUrl: string;
let ctx: AdminTestContext;

beforeAll(async () => {
  aclPort = await freePort();
  // An ACL user, the default user off: only alice's login works; database 2, so db 0 stays empty.
  aclRedis = redisServer(aclPort, ['--user', 'default', 'off', '--user', 'alice', 'on', `>${ACL_PASSWORD}`, '~*', '&*', '+@all']);
  aclUrl = `redis://alice:${ACL_PASSWORD}@127.0.0.1:${aclPort}/2`;
  await untilPong(aclUrl);
  ctx = await createAdminContext({ config: { redisUrl: aclUrl } });
});
afterAll(async () => {
  await ctx?.close();
  await aclRedis?.stop();
});

const depsOf = (context: AdminTestContext): JobDependencies => ({
  config: context.config,
  clock: context.clock,
  db: context.db,
  redis: context.redis,
  queues: context.app.queues,
});

describe('a Redis that demands a user, a password and a database index', () => {
  it('admin writes through to it (snapshots land in database 2, logged in as alice)', async () => {
    const org = await createTestOrganization(ctx.db, 'Auth');
    const res = await caller(ctx, org.api_key).post('/org/features', { key: 'sso', name: 'SSO', kind: 'flag' });
    expect(res.statusCode).toBe(201);
    const direct = new Redis(aclUrl, { maxRetriesPerRequest: 1 });
    const dbZero = new Redis(`redis://alice:${ACL_PASSWORD}@127.0.0.1:${aclPort}/0`, { maxRetriesPerRequest: 1 });
    try {
      const catalog = redisKeys(ctx.config.redisKeyPrefix).catalog(org.organization_id);
      await waitFor(async () => (await direct.exists(catalog)) === 1, 'the catalog snapshot in database 2', 5000);
      expect(await dbZero.dbsize()).toBe(0);
    } finally {
      direct.disconnect();
      dbZero.disconnect();
    }
  });

  it("the worker's queues log in too and process a job; a schedule no job uses any more is dropped", async () => {
    // The schedule an earlier version kept for its webhook replay sentinel.
    await (ctx.app.queues['webhook-delivery'] as unknown as Queue).upsertJobScheduler(
      'webhook-delivery-every',
      { every: 60_000 },
      { name: 'webhook-delivery', data: { deliveryId: 'replay-stale' } },
    );
    const stop = await startWorkers(depsOf(ctx), jobDefinitions);
    try {
      expect(await ctx.app.queues['webhook-delivery'].getJobSchedulers()).toEqual([]);
      const queue = ctx.app.queues['audit-settle'];
      const job = await queue.add('audit-settle', { olderThanMs: 60_000 });
      await waitFor(async () => (await job.getState()) === 'completed', 'the audit-settle job to complete', 10_000);
      expect((await queue.getJobSchedulers()).map((scheduler) => scheduler.key)).toContain('audit-settle-every');
    } finally {
      await stop();
    }
  });

  it('checkRedisLogin accepts the right login and refuses a database the server does not have', async () => {
    await expect(checkRedisLogin({ redisUrl: aclUrl, redisClusterNodes: [] })).resolves.toBeUndefined();
    const refused = checkRedisLogin({
      redisUrl: `redis://alice:${ACL_PASSWORD}@127.0.0.1:${aclPort}/99`,
      redisClusterNodes: [],
    });
    await expect(refused).rejects.toThrow(RedisLoginError);
    await expect(refused).rejects.toThrow(/DB index is out of range/);
  });
});

describe('admin and gateway processes whose login Redis refuses stop and say why', () => {
  it.each([
    ['admin', 'admin/src/server.ts'],
    ['gateway', 'gateway/src/server.ts'],
  ])('%s', async (_name, script) => {
    const port = await freePort();
    const service = startNode(script, {
      REDIS_URL: `redis://alice:not-the-pw-9f3@127.0.0.1:${aclPort}/2`,
      REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
      DATABASE_URL: ctx.config.databaseUrl,
      ADMIN_PORT: String(port),
      GATEWAY_PORT: String(port),
      LOG_LEVEL: 'fatal',
    });
    try {
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => resolve(null), 30_000);
        service.child.once('exit', (exitCode) => {
          clearTimeout(timer);
          resolve(exitCode);
        });
      });
      expect(code, service.output()).toBe(1);
      expect(service.output()).toMatch(/refused the login.*WRONGPASS/);
      expect(service.output()).not.toContain('not-the-pw-9f3');
    } finally {
      await service.stop();
    }
  });
});

describe('a worker process whose login Redis refuses stops at once and says why', () => {
  const cases: [string, () => string, RegExp][] = [
    ['a wrong password', () => `redis://alice:not-the-pw-9f3@127.0.0.1:${aclPort}/2`, /refused the login.*WRONGPASS/],
    ['no password at all', () => `redis://127.0.0.1:${aclPort}`, /refused the login.*NOAUTH/],
    ['an unknown user', () => `redis://mallory:not-the-pw-9f3@127.0.0.1:${aclPort}`, /refused the login.*WRONGPASS/],
    ['an unreadable REDIS_URL', () => `127.0.0.1:${aclPort}`, /RedisUrlError: REDIS_URL "127\.0\.0\.1:\d+": no scheme/],
  ];
  it.each(cases)('%s', async (_name, url, message) => {
    const worker = startNode('admin/src/worker.ts', {
      REDIS_URL: url(),
      REDIS_KEY_PREFIX: ctx.config.redisKeyPrefix,
      DATABASE_URL: ctx.config.databaseUrl,
      LOG_LEVEL: 'silent',
    });
    try {
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => resolve(null), 20_000);
        worker.child.once('exit', (exitCode) => {
          clearTimeout(timer);
          resolve(exitCode);
        });
      });
      expect(code, worker.output()).not.toBeNull();
      expect(code).not.toBe(0);
      expect(worker.output()).toMatch(message);
      expect(worker.output()).not.toContain('not-the-pw-9f3');
    } finally {
      await worker.stop();
    }
  });
});

/** A throwaway CA and a certificate for 127.0.0.1 signed by it, in a fresh directory. */
function testCertificates(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ent-redis-tls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore', timeout: 20_000 });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=ent-test-ca');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'ext');
  return dir;
}

describe('rediss:// (TLS) with a password and a database index', () => {
  it('a worker process connects over TLS and runs the jobs queued there', async () => {
    const dir = testCertificates();
    const port = await freePort();
    // The later --port 0 turns the plain port off: only TLS is served.
    const server = redisServer(port, [
      '--port', '0', '--tls-port', String(port), '--tls-cert-file', join(dir, 'server.pem'),
      '--tls-key-file', join(dir, 'server.key'), '--tls-ca-cert-file', join(dir, 'ca.pem'),
      '--tls-auth-clients', 'no', '--requirepass', REQUIRED_PASSWORD,
    ]);
    const ca = readFileSync(join(dir, 'ca.pem'));
    const prefix = `${ctx.config.redisKeyPrefix}tls`;
    const producer = new Queue('audit-settle', {
      connection: { host: '127.0.0.1', port, password: REQUIRED_PASSWORD, db: 3, tls: { ca }, maxRetriesPerRequest: null },
      prefix: redisKeys(prefix).queuePrefix,
    });
    producer.on('error', () => {});
    // The worker trusts the test CA the way a deployment adds its own: NODE_EXTRA_CA_CERTS.
    const worker = startNode('admin/src/worker.ts', {
      REDIS_URL: `rediss://:${REQUIRED_PASSWORD}@127.0.0.1:${port}/3`,
      NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem'),
      REDIS_KEY_PREFIX: prefix,
      DATABASE_URL: ctx.config.databaseUrl,
      LOG_LEVEL: 'silent',
    });
    try {
      await waitFor(async () => worker.output().includes('job kinds and the outbox relay'), 'the worker to start', 20_000);
      const job = await producer.add('audit-settle', { olderThanMs: 60_000 });
      await waitFor(async () => (await job.getState()) === 'completed', 'the job over TLS to complete', 15_000);
      expect((await producer.getJobSchedulers()).map((scheduler) => scheduler.key)).toEqual(['audit-settle-every']);
    } finally {
      await worker.stop();
      await producer.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('schedulers after Redis restarts empty', () => {
  it('the running worker registers them again and a scheduled job runs, without a restart of the worker', async () => {
    const port = await freePort();
    const args = ['--requirepass', REQUIRED_PASSWORD];
    const url = `redis://:${REQUIRED_PASSWORD}@127.0.0.1:${port}/1`;
    let server = redisServer(port, args);
    await untilPong(url);
    const own = await createAdminContext({ config: { redisUrl: url } });
    const fastSettle: AnyJobDefinition = { ...auditSettleJob, repeatEveryMs: 250 };
    const definitions = jobDefinitions.map((definition) => (definition === auditSettleJob ? fastSettle : definition));
    const stop = await startWorkers(depsOf(own), definitions);
    const settle = own.app.queues['audit-settle'] as unknown as Queue;
    const repeating = definitions.filter((definition) => definition.repeatEveryMs);
    const schedulerIds = async () => {
      const ids: string[] = [];
      for (const { queue } of repeating) {
        const schedulers = await (own.app.queues[queue as QueueName] as unknown as Queue).getJobSchedulers();
        ids.push(...schedulers.map((scheduler) => scheduler.key));
      }
      return ids.sort();
    };
    const expected = repeating.map(({ queue }) => `${queue}-every`).sort();
    try {
      expect(await schedulerIds()).toEqual(expected);
      await waitFor(async () => (await settle.getCompletedCount()) > 0, 'a scheduled audit-settle run', 10_000);

      const direct = new Redis(url, { maxRetriesPerRequest: 1 });
      direct.on('error', () => {});
      await direct.set('restart-marker', '1');
      await server.stop();
      server = redisServer(port, args);
      await untilPong(url);
      await waitFor(async () => (await direct.exists('restart-marker')) === 0, 'the restarted Redis to answer empty', 10_000);
      direct.disconnect();

      await waitFor(async () => (await schedulerIds()).join() === expected.join(), 'the schedulers again', 20_000);
      // The restarted Redis began empty: any completed run is one the restored scheduler made.
      await waitFor(async () => (await settle.getCompletedCount()) > 0, 'a scheduled run after the restart', 20_000);
    } finally {
      await stop();
      await own.close();
      await server.stop();
    }
  });

  it('a Redis flushed under a running worker gets them back from the periodic check', async () => {
    const stop = await startWorkers(depsOf(ctx), jobDefinitions, { schedulerCheckEveryMs: 200 });
    const direct = new Redis(aclUrl, { maxRetriesPerRequest: 1 });
    try {
      const settle = ctx.app.queues['audit-settle'];
      expect((await settle.getJobSchedulers()).map((scheduler) => scheduler.key)).toEqual(['audit-settle-every']);
      await direct.flushdb();
      expect(await settle.getJobSchedulers()).toEqual([]);
      await waitFor(async () => (await settle.getJobSchedulers()).length === 1, 'the scheduler after FLUSHDB', 5000);
    } finally {
      direct.disconnect();
      await stop();
    }
  });
});
