/**
 * `npm run bench -- consume-floor`: the least Redis CPU a consume can add to a check in this design (DESIGN.md §5:
 * Redis holds the hot balance, the worker persists every changed one), measured on a private redis-server with the
 * same key shape as the gateway's: 100,000 distinct balances, operations in script calls of 50 as the gate batches
 * them, and a drain reading each changed balance once (SPOP of 500, then one pipelined read per hash: the least the
 * read costs Redis; the worker's own drain is one script call, metered-drain-1.lua, which costs Redis more and the
 * worker less: decisions.md, "The drain in one script"). No gateway: these are the commands any implementation of the
 * design must run, without the rest of ours around them.
 */
import { Redis } from 'ioredis';
import { envNumber, log, median, redisCpuSeconds, startPrivateRedis } from '../harness.ts';

export interface ConsumeFloorResult {
  mode: 'consume-floor';
  date: string;
  settings: { balances: number; operationsPerCall: number; rounds: number };
  /** Redis CPU µs per operation (script shapes) or per drained balance (drain shapes), median of the rounds. */
  shapes: { name: string; description: string; us: number; rounds: number[] }[];
}

const SCRIPTS: Record<string, { description: string; source: string }> = {
  'arguments only': {
    description: 'a script call that only reads its arguments: the per-operation cost of sending one',
    source: 'local n = 0 for i = 1, #ARGV do n = n + #ARGV[i] end return n',
  },
  'counter + dirty mark': {
    description:
      "HINCRBY of the balance, one SADD of the call's members: an unconditional counter, the least a consume does",
    source:
      "for i = 1, #ARGV do redis.call('HINCRBY', 'b:' .. ARGV[i], 'u', 1) end redis.call('SADD', 'dirty', unpack(ARGV)) return 1",
  },
  'one-field read and write + dirty mark': {
    description:
      'HGET and HSET of one field holding the whole balance: a conditional consume with the best layout',
    source:
      "for i = 1, #ARGV do local b = redis.call('HGET', 'h:' .. ARGV[i], 'b') redis.call('HSET', 'h:' .. ARGV[i], 'b', '1|2|3|4') end redis.call('SADD', 'dirty', unpack(ARGV)) return 1",
  },
  'four-field read, two-field write + dirty mark': {
    description: 'HMGET u k r e and HSET u r: the layout the scripts use today',
    source:
      "for i = 1, #ARGV do local s = redis.call('HMGET', 'b:' .. ARGV[i], 'u', 'k', 'r', 'e') redis.call('HSET', 'b:' .. ARGV[i], 'u', (tonumber(s[1]) or 0) + 1, 'r', (tonumber(s[3]) or 0) + 1) end redis.call('SADD', 'dirty', unpack(ARGV)) return 1",
  },
  // Issue 35: the least a consume spending one of five credits adds. The credits' figures live in Redis under
  // their own hash (they span periods, the balance does not), named here without any argument: no ids are sent.
  'five credits held, allowance left': {
    description:
      'HMGET u k r e ro, EXISTS of a credit-spent hash never spent, HSET u r + dirty mark: credits read, none spent',
    source:
      "for i = 1, #ARGV do local s = redis.call('HMGET', 'b:' .. ARGV[i], 'u', 'k', 'r', 'e', 'ro') redis.call('EXISTS', 'n:' .. ARGV[i]) redis.call('HSET', 'b:' .. ARGV[i], 'u', (tonumber(s[1]) or 0) + 1, 'r', (tonumber(s[3]) or 0) + 1) end redis.call('SADD', 'dirty', unpack(ARGV)) return 1",
  },
  'spending one of five credits': {
    description:
      "HMGET u k r e ro, HMGET of the five credits' spent, HSET u r k, HSET of the one spent + dirty mark",
    source:
      "for i = 1, #ARGV do local s = redis.call('HMGET', 'b:' .. ARGV[i], 'u', 'k', 'r', 'e', 'ro') local c = redis.call('HMGET', 'c:' .. ARGV[i], 'c1', 'c2', 'c3', 'c4', 'c5') redis.call('HSET', 'b:' .. ARGV[i], 'u', (tonumber(s[1]) or 0) + 1, 'r', (tonumber(s[3]) or 0) + 1, 'k', (tonumber(s[2]) or 0) + 1) redis.call('HSET', 'c:' .. ARGV[i], 'c1', (tonumber(c[1]) or 0) + 1) end redis.call('SADD', 'dirty', unpack(ARGV)) return 1",
  },
};

/** The worker's drain: the hashes read per changed balance, by the prefixes the scripts above wrote. */
const DRAINS: Record<string, { description: string; prefixes: string[] }> = {
  drain: {
    description:
      'SPOP of 500 and a pipelined HGETALL per balance: reading a changed balance once to persist it',
    prefixes: ['b:'],
  },
  'drain with credits': {
    description:
      "the drain, and the HGETALL of the balance's credit-spent hash: what a spending balance persists",
    prefixes: ['b:', 'c:'],
  },
};

export async function runConsumeFloor(): Promise<ConsumeFloorResult> {
  const balances = envNumber('BENCH_SUBSCRIBERS', 100_000);
  const rounds = envNumber('BENCH_ROUNDS', 5);
  const perCall = 50;
  const redisUrl = await startPrivateRedis();
  const redis = new Redis(redisUrl);
  try {
    const member = (i: number) => `sub-${i % balances}|metered|1764547200000`;
    const shas = new Map<string, string>();
    for (const [name, { source }] of Object.entries(SCRIPTS))
      shas.set(name, (await redis.script('LOAD', source)) as string);
    const measured = new Map<string, number[]>(
      [...shas.keys(), ...Object.keys(DRAINS)].map((name) => [name, []]),
    );
    let next = 0;
    for (let round = 0; round < rounds; round++) {
      for (const [name, sha] of shas) {
        const calls = (2 * balances) / perCall;
        const before = redisCpuSeconds(redisUrl);
        for (let call = 0; call < calls; call += 20) {
          await Promise.all(
            Array.from({ length: 20 }, () =>
              redis.evalsha(sha, 0, ...Array.from({ length: perCall }, () => member(next++))),
            ),
          );
        }
        measured.get(name)!.push(((redisCpuSeconds(redisUrl) - before) * 1e6) / (calls * perCall));
      }
      // The worker's drain of every balance marked, once per drain shape: the scripts above wrote every hash.
      for (const [name, { prefixes }] of Object.entries(DRAINS)) {
        await redis.sadd('dirty', ...Array.from({ length: balances }, (_, i) => member(i)));
        const dirty = await redis.scard('dirty');
        const before = redisCpuSeconds(redisUrl);
        for (let drained = 0; drained <= dirty; drained += 500) {
          const members = (await redis.spop('dirty', 500)) as string[];
          if (members.length === 0) break;
          const pipeline = redis.pipeline();
          for (const m of members) for (const prefix of prefixes) pipeline.hgetall(`${prefix}${m}`);
          await pipeline.exec();
        }
        measured.get(name)!.push(((redisCpuSeconds(redisUrl) - before) * 1e6) / dirty);
      }
      log(
        `round ${round + 1}: ${[...measured].map(([name, v]) => `${name} ${v.at(-1)!.toFixed(2)}`).join(', ')} µs`,
      );
    }
    return {
      mode: 'consume-floor',
      date: new Date().toISOString(),
      settings: { balances, operationsPerCall: perCall, rounds },
      shapes: [...measured].map(([name, values]) => ({
        name,
        description: SCRIPTS[name]?.description ?? DRAINS[name]!.description,
        us: median(values),
        rounds: values,
      })),
    };
  } finally {
    redis.disconnect();
  }
}

export function renderConsumeFloor(result: ConsumeFloorResult): string {
  return [
    `Redis CPU per operation on a private redis-server, ${result.settings.balances.toLocaleString('en-US')} distinct ` +
      `balances, script calls of ${result.settings.operationsPerCall} (\`npm run bench -- consume-floor\`, medians of ` +
      `${result.settings.rounds} rounds, ${result.date.slice(0, 10)}):`,
    '',
    '| shape | µs | what it is |',
    '|---|---|---|',
    ...result.shapes.map((shape) => `| ${shape.name} | ${shape.us.toFixed(2)} | ${shape.description} |`),
  ].join('\n');
}
