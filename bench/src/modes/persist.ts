/**
 * `npm run bench -- persist`: what the worker's metered persister (admin/src/features/metered-usage/persister.ts)
 * costs per persisted balance, as `metering` loads it: every balance a different subscriber's, so nothing coalesces.
 * N dirty balances (BENCH_SUBSCRIBERS, default 50,000) are written straight into a private Redis, then the persister
 * runs in this process until the dirty set is empty; CPU per balance of this process (the persister's JavaScript),
 * of the Postgres backends of the run's database (/proc/<pid>/stat) and of the private Redis (INFO cpu), and the
 * Redis commands the drain ran. Round 1 finds the worker's subscriber documents cold; the rounds after it (each a
 * change of every balance, one revision up) are what a running worker sees. BENCH_PERSIST_CREDIT_SHARE (0..1): the
 * share of balances whose consume spent a credit (k and the credit-spent hash written as the gateway's Lua writes
 * them, the balance named with its hash). BENCH_PERSIST_CPU_PROFILE=<file>: a V8 CPU profile of round 2's persisting.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createDb } from '@ent/common/db/connect';
import { createRedis } from '@ent/common/redis/connect';
import { creditBalanceDirtyMember, meteredMember, redisKeys } from '@ent/common/redis/keys';
import { createMeteredPersister } from '../../../admin/src/features/metered-usage/persister.ts';
import { createQueues, closeQueues } from '../../../admin/src/jobs/queues.ts';
import { queueNames } from '../../../admin/src/job-registry.ts';
import { createWorld, envNumber, log, median, processCpuSeconds, startPrivateRedis } from '../harness.ts';
import { DEFAULT_SHAPE, LARGE_LIMIT, METERED_FEATURE } from '../seed.ts';

export interface PersistRound {
  round: number;
  balances: number;
  persisted: number;
  passes: number;
  ms: number;
  workerCpuUs: number;
  postgresCpuUs: number;
  redisCpuUs: number;
  /** Redis commands per balance, by name (INFO commandstats deltas). */
  redisCalls: Record<string, number>;
}

export interface PersistResult {
  mode: 'persist';
  date: string;
  settings: { subscribers: number; rounds: number; batchSize: number; creditShare: number };
  loadAverage: { start: number; end: number };
  rounds: PersistRound[];
  /** Medians over the warm rounds (2 on), per persisted balance. */
  warm: { workerCpuUs: number; postgresCpuUs: number; redisCpuUs: number };
}

/** A Postgres backend's CPU seconds so far (0 once it has exited). */
function cpuSecondsOf(pid: number): number {
  try {
    return processCpuSeconds(pid);
  } catch {
    return 0;
  }
}

async function redisInfo(redis: Redis): Promise<{ cpu: number; calls: Map<string, number> }> {
  const cpuText = await redis.info('cpu');
  const value = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(cpuText)?.[1] ?? 0);
  const calls = new Map<string, number>();
  for (const match of (await redis.info('commandstats')).matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g))
    calls.set(match[1]!, Number(match[2]));
  return { cpu: value('used_cpu_user') + value('used_cpu_sys'), calls };
}

const monthStart = (ms: number, months = 0) => {
  const at = new Date(ms);
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + months, 1);
};

export async function runPersist(): Promise<PersistResult> {
  const subscribers = envNumber('BENCH_SUBSCRIBERS', 50_000);
  const rounds = envNumber('BENCH_ROUNDS', 4);
  const batchSize = envNumber('BENCH_PERSIST_BATCH', 500);
  const creditShare = envNumber('BENCH_PERSIST_CREDIT_SHARE', 0);
  const startLoad = loadavg()[0]!;
  const shape = {
    ...DEFAULT_SHAPE,
    subscribers,
    metered: [{ key: METERED_FEATURE, limits: [LARGE_LIMIT], credits: creditShare > 0 ? 1 : 0 }],
  };
  const world = await createWorld(shape, { redisUrl: await startPrivateRedis() });
  const db = createDb(world.env.DATABASE_URL!);
  const redis = createRedis({ redisUrl: world.redisUrl, redisClusterNodes: [] });
  const writer = new Redis(world.redisUrl);
  const probe = new pg.Client({ connectionString: world.env.DATABASE_OWNER_URL });
  const queues = createQueues(
    { ...world.config, redisUrl: world.redisUrl, redisKeyPrefix: world.env.REDIS_KEY_PREFIX! },
    queueNames,
  );
  try {
    await probe.connect();
    const keys = redisKeys(world.env.REDIS_KEY_PREFIX!);
    const org = world.organizationId;
    const persister = createMeteredPersister(
      {
        db,
        redis,
        redisKeys: keys,
        clock: { now: () => Date.now() },
        queues,
        log: { warn: (m) => log(`warn: ${m}`), error: (m) => log(`error: ${m}`) },
      },
      { batchSize, maxBatches: 1_000_000 },
    );
    const creditIds = (s: number) => `cr_bench_m0_${s}_0`;
    const startMs = monthStart(Date.now());
    const endMs = monthStart(Date.now(), 1);
    const results: PersistRound[] = [];
    const profileFile = process.env.BENCH_PERSIST_CPU_PROFILE;
    const profiler = profileFile ? new Session() : null;
    profiler?.connect();
    await profiler?.post('Profiler.enable');
    for (let round = 1; round <= rounds; round++) {
      // Every subscriber's balance changes once (used = round, one revision up), as one consume each would.
      for (let from = 0; from < subscribers; from += 1000) {
        const pipeline = writer.pipeline();
        const members: string[] = [];
        for (let s = from; s < Math.min(subscribers, from + 1000); s++) {
          const subscriber = `sub-${s}`;
          const member = meteredMember(subscriber, METERED_FEATURE, startMs);
          const spends = s < subscribers * creditShare;
          // As the gateway's scripts name it: with its credit-spent hash once credits covered something.
          members.push(spends ? creditBalanceDirtyMember(member) : member);
          // As the gateway's scripts write it: k only once credits covered something.
          const balanceKey = keys.meteredBalance(org, member);
          if (spends) pipeline.hset(balanceKey, 'u', round, 'r', round, 'e', endMs, 'k', round);
          else pipeline.hset(balanceKey, 'u', round, 'r', round, 'e', endMs);
          if (spends) {
            pipeline.hset(keys.creditSpent(org, subscriber, METERED_FEATURE), creditIds(s), round);
          }
        }
        pipeline.sadd(keys.meteredDirty(org), ...members);
        await pipeline.exec();
      }
      await writer.sadd(keys.meteredDirtyOrganizations, org);
      const backends = async () =>
        (
          await probe.query<{ pid: number }>(
            'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
          )
        ).rows.map((row) => row.pid);
      const pgBefore = new Map((await backends()).map((pid) => [pid, cpuSecondsOf(pid)]));
      const redisBefore = await redisInfo(writer);
      if (round === 2) await profiler?.post('Profiler.start');
      const cpuBefore = process.cpuUsage();
      const started = Date.now();
      let persisted = 0;
      let passes = 0;
      for (; passes < 100_000 && Date.now() - started < 600_000; passes++) {
        const pass = await persister.persistOnce();
        persisted += pass.persisted;
        if (pass.failed > 0) throw new Error('a persist pass failed');
        if ((await writer.scard(keys.meteredDirty(org))) === 0) break;
      }
      const cpu = process.cpuUsage(cpuBefore);
      const ms = Date.now() - started;
      if (round === 2 && profiler) {
        const { profile } = await profiler.post('Profiler.stop');
        writeFileSync(profileFile!, JSON.stringify(profile));
        log(`wrote round 2's CPU profile to ${profileFile}`);
      }
      const redisAfter = await redisInfo(writer);
      let pgCpu = 0;
      for (const pid of await backends()) pgCpu += cpuSecondsOf(pid) - (pgBefore.get(pid) ?? 0);
      const per = (seconds: number) => (seconds * 1e6) / subscribers;
      const redisCalls: Record<string, number> = {};
      for (const [name, calls] of redisAfter.calls) {
        const delta = calls - (redisBefore.calls.get(name) ?? 0);
        if (delta > 0) redisCalls[name] = Math.round((delta / subscribers) * 1000) / 1000;
      }
      const figures: PersistRound = {
        round,
        balances: subscribers,
        persisted,
        passes: passes + 1,
        ms,
        workerCpuUs: per((cpu.user + cpu.system) / 1e6),
        postgresCpuUs: per(pgCpu),
        // Less the figures' own INFO and SCARD calls, which are a handful per pass.
        redisCpuUs: per(redisAfter.cpu - redisBefore.cpu),
        redisCalls,
      };
      results.push(figures);
      log(
        `round ${round}: ${persisted} rows in ${ms} ms; per balance: worker ${figures.workerCpuUs.toFixed(1)} µs, ` +
          `postgres ${figures.postgresCpuUs.toFixed(1)} µs, redis ${figures.redisCpuUs.toFixed(1)} µs ` +
          `(${JSON.stringify(redisCalls)}), load ${loadavg()[0]!.toFixed(2)}`,
      );
    }
    const warm = results.slice(1);
    const medianOf = (pick: (round: PersistRound) => number) => (warm.length ? median(warm.map(pick)) : 0);
    return {
      mode: 'persist',
      date: new Date().toISOString(),
      settings: { subscribers, rounds, batchSize, creditShare },
      loadAverage: { start: startLoad, end: loadavg()[0]! },
      rounds: results,
      warm: {
        workerCpuUs: medianOf((round) => round.workerCpuUs),
        postgresCpuUs: medianOf((round) => round.postgresCpuUs),
        redisCpuUs: medianOf((round) => round.redisCpuUs),
      },
    };
  } finally {
    await probe.end().catch(() => undefined);
    await closeQueues(queues).catch(() => undefined);
    writer.disconnect();
    redis.disconnect();
    await db.destroy();
    await world.cleanup();
  }
}

export function renderPersist(result: PersistResult): string {
  const rows = result.rounds.map(
    (round) =>
      `| ${round.round} | ${round.persisted} | ${round.ms} | ${round.workerCpuUs.toFixed(1)} | ` +
      `${round.postgresCpuUs.toFixed(1)} | ${round.redisCpuUs.toFixed(1)} |`,
  );
  return [
    `Metered persister, ${result.settings.subscribers} balances a round (batch ${result.settings.batchSize}, ` +
      `credit share ${result.settings.creditShare}), load ${result.loadAverage.start.toFixed(2)} → ` +
      `${result.loadAverage.end.toFixed(2)}`,
    '',
    '| round | rows | ms | worker µs/balance | postgres µs/balance | redis µs/balance |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    `Warm median: worker ${result.warm.workerCpuUs.toFixed(1)} µs, postgres ${result.warm.postgresCpuUs.toFixed(1)} µs, ` +
      `redis ${result.warm.redisCpuUs.toFixed(1)} µs per balance`,
  ].join('\n');
}
