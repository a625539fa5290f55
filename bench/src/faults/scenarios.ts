import type pg from 'pg';
import { sleep } from './http.ts';
import { killMidImport } from './import-kill.ts';
import type { CountRule } from './invariants.ts';
import type { PrivatePostgres } from './postgres.ts';
import type { FaultRedis } from './redis.ts';
import type { Services } from './services.ts';
import type { Writer } from './writer.ts';

export interface Stack {
  postgres: PrivatePostgres;
  redis: FaultRedis;
  services: Services;
  /** The owner's pool on the run's database. */
  pool: pg.Pool;
  appUrl: string;
}

/** What a scenario reports back once everything it broke is running again. */
export interface Injected {
  recoveredAt: number;
  countRule: CountRule;
  postgresOutage?: { from: number; to: number };
}

/** What the matrix placed for a scenario before its load started. */
export interface Placed {
  /** Rollover rows: the instant the subscribers' period ends and the next one starts. */
  boundaryAt: number | null;
}

export interface Scenario {
  name: string;
  injected: string;
  /** Consumes against a hard limit and reports run too; the row reports usage lost and over-consumption. */
  metered?: boolean;
  /** Metered, and every subscriber holds credits past the allowance: the row reports credits double-spent. */
  credits?: boolean;
  /**
   * Metered, on a daily rollover grant whose period ends a few seconds into the load: the row reports the rollover
   * credits made and anything spent twice across the boundary.
   */
  rollover?: boolean;
  /** Breaks something under the running load and writer, revokes the victim key meanwhile, and recovers. */
  inject(stack: Stack, writer: Writer, placed: Placed): Promise<Injected>;
}

const all: CountRule = { kind: 'all' };

/** Waits (at most 3 s) until a write is on its way, so a kill lands in the middle of one. */
async function midWrite(writer: Writer): Promise<void> {
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline) {
    const since = writer.inFlightSince();
    if (since !== null && Date.now() - since >= 3) return;
    await sleep(1);
  }
}

/** Keeps the fault on for `ms` in total from `since`, whatever the revocation took. */
const holdUntil = (since: number, ms: number) => sleep(Math.max(0, since + ms - Date.now()));

/** The fault holds for `holdMs` from `since`; the victim key is revoked `revokeAfterMs` into it. */
async function holdRevoking(writer: Writer, since: number, revokeAfterMs: number, holdMs: number): Promise<void> {
  await sleep(revokeAfterMs);
  await writer.revoke();
  await holdUntil(since, holdMs);
}

const faults: Scenario[] = [
  {
    name: 'redis-refusing',
    injected: 'Redis stopped 10 s (connection refused), back with its data',
    async inject({ redis }, writer) {
      await redis.stop();
      const since = Date.now();
      await holdRevoking(writer, since, 2000, 10_000);
      await redis.start();
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'redis-empty',
    injected: 'Redis stopped 10 s, back empty (its files deleted)',
    async inject({ redis }, writer) {
      await redis.stop();
      const since = Date.now();
      await holdRevoking(writer, since, 2000, 10_000);
      redis.wipe();
      await redis.start();
      // The gateways put back the count the lost Redis had reached (the usage epoch: eval-gate-batch-8.lua).
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'redis-hung',
    injected: 'Redis SIGSTOP 5 s, then SIGCONT',
    async inject({ redis }, writer) {
      redis.pause();
      const since = Date.now();
      try {
        await holdRevoking(writer, since, 1000, 5000);
      } finally {
        redis.resume();
      }
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'postgres-stopped',
    injected: 'Postgres fast shutdown, 10 s down, restarted',
    async inject({ postgres }, writer) {
      await postgres.stop();
      const from = Date.now();
      await holdRevoking(writer, from, 2000, 10_000);
      const to = Date.now();
      await postgres.start();
      return { recoveredAt: Date.now(), countRule: all, postgresOutage: { from, to } };
    },
  },
  {
    name: 'admin-kill',
    injected: 'admin kill -9 in the middle of a write (revocation queued just before), restarted',
    async inject({ services }, writer) {
      const revocation = writer.revoke();
      await midWrite(writer);
      await services.admin.kill9();
      await revocation;
      await sleep(1000);
      await services.admin.start();
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'admin-kill-redis-down',
    injected: 'Redis stopped; writes + revocation; admin kill -9 mid write; Redis back with its data; admin restarted',
    async inject({ redis, services }, writer) {
      await redis.stop();
      await sleep(1000);
      await writer.revoke();
      await sleep(2000);
      await midWrite(writer);
      await services.admin.kill9();
      await sleep(1000);
      await redis.start();
      await services.admin.start();
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'admin-kill-import',
    injected: 'admin kill -9 in the middle of an import of 20,000 subscribers, restarted: it resumes (DESIGN.md §5)',
    async inject({ services, appUrl, pool }, writer) {
      const revocation = writer.revoke();
      await killMidImport(services, appUrl, pool, 'admin');
      await revocation;
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'worker-kill-import',
    injected:
      'worker kill -9 in the middle of an import of 20,000 subscribers (its batches announced to gateways meanwhile), ' +
      'restarted: whole batches only, then succeeded and served by every gateway',
    async inject({ services, appUrl, pool }, writer) {
      const revocation = writer.revoke();
      await killMidImport(services, appUrl, pool, 'worker');
      await revocation;
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'worker-kill',
    injected: 'worker kill -9, 5 s down, restarted',
    async inject({ services }, writer) {
      await services.worker.kill9();
      const since = Date.now();
      await writer.revoke();
      await holdUntil(since, 5000);
      await services.worker.start();
      return { recoveredAt: Date.now(), countRule: all };
    },
  },
  {
    name: 'gateway-kill',
    injected: 'gateway-2 of 2 kill -9 under load, 3 s down, restarted',
    async inject({ services }, writer) {
      await services.gateways[1]!.kill9();
      const since = Date.now();
      await writer.revoke();
      await holdUntil(since, 3000);
      await services.gateways[1]!.start();
      return { recoveredAt: Date.now(), countRule: { kind: 'killed-gateway', gateway: 1 } };
    },
  },
];

/** The faults a metered row repeats with consumes and reports running (issue 34). */
const METERED_FAULTS = ['redis-refusing', 'redis-empty', 'redis-hung', 'gateway-kill', 'worker-kill'];

/** The faults a credits row repeats with consumes spending the allowance, then credits (issue 35). */
const CREDIT_FAULTS = ['redis-empty', 'worker-kill'];

/**
 * Issue 35's "worker killed during rollover": the worker is killed a second before the subscribers' period ends and
 * started again four seconds after, while consumes cross the boundary: the first touch of the new period makes the
 * rollover (the gateway's Lua), the restarted worker records it.
 */
const rolloverWorkerKill: Scenario = {
  name: 'credits-rollover-worker-kill',
  injected:
    'worker kill -9 a second before a rollover grant\'s period boundary, restarted 4 s after it; consumes crossing it',
  metered: true,
  rollover: true,
  async inject({ services }, writer, { boundaryAt }) {
    if (boundaryAt === null) throw new Error('the rollover row needs a period boundary');
    await sleep(Math.max(0, boundaryAt - 1000 - Date.now()));
    await services.worker.kill9();
    await writer.revoke();
    await sleep(Math.max(0, boundaryAt + 4000 - Date.now()));
    await services.worker.start();
    return { recoveredAt: Date.now(), countRule: all };
  },
};

export const scenarios: Scenario[] = [
  ...faults,
  ...METERED_FAULTS.map((name) => {
    const fault = faults.find((f) => f.name === name)!;
    return { ...fault, name: `metered-${name}`, injected: `${fault.injected}; consumes and reports running`, metered: true };
  }),
  ...CREDIT_FAULTS.map((name) => {
    const fault = faults.find((f) => f.name === name)!;
    return {
      ...fault,
      name: `credits-${name}`,
      injected: `${fault.injected}; consumes past the allowance spending credits`,
      metered: true,
      credits: true,
    };
  }),
  rolloverWorkerKill,
];
