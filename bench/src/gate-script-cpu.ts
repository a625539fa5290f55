/**
 * Redis CPU of eval-gate-batch-8.lua per metered operation, A/B: two source trees' scripts and argument builders
 * (e.g. a `git archive` of the base commit and the worktree), alternated on one private redis-server, so a change of
 * the script or of its arguments is judged by the same run's ratio (the machine is shared: wall time is noise).
 *
 *   [ROUNDS=8] [BATCHES=1000] [BLOCKS=1] [SHAPES=...] node --import tsx bench/src/gate-script-cpu.ts <treeA> <treeB> [port]
 *
 * Per shape and tree: EVALSHA µs per operation (INFO commandstats: the script alone) and used_cpu µs per operation
 * (the whole server: protocol parsing of the arguments and the reply included).
 * SHAPES (default '1c 16c 16r 16-'): batch size, then c (consumes), r (reads), - (plain evals), or, with five live
 * credits per subscriber (issue 35), ch (consumes with the allowance left: the credits are read, none spent) and cs
 * (consumes with an allowance of 0: each spends a credit). Credit operations are made by each tree's own
 * meteredOperation, so their spec is exactly what that tree's gateway sends.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { redisKeys } from '@ent/common/redis/keys';
import { balanceTtlMs } from '@ent/common/metering/metered-period';
import type { EvalGateInput } from '../../gateway/src/metering/contract.ts';
import type { MeteredKind, MeteredOperation } from '../../gateway/src/metering/metered-operations.ts';
import type { meteredOperation as MeteredOperationOf } from '../../gateway/src/metering/metered-operations.ts';
import type { CatalogDoc, CreditDoc, SubscriberDoc } from '@ent/common/snapshots/documents';

type GateArguments = (
  evals: readonly EvalGateInput[],
  knownStamp: number,
  meteredKeys?: () => string[],
) => { args: (string | number)[] };

const [treeA, treeB, portArg] = process.argv.slice(2);
if (!treeA || !treeB) throw new Error('usage: gate-script-cpu.ts <treeA> <treeB> [port]');
const port = Number(portArg ?? 6431);
const ROUNDS = Number(process.env.ROUNDS ?? 8);
const BATCHES = Number(process.env.BATCHES ?? 1_000);
// Blocks per round (BATCHES / BLOCKS calls each), the trees alternated ABBA by block.
const BLOCKS = Number(process.env.BLOCKS ?? 1);
const SUBSCRIBERS = 20_000;
const STAMP = 7;
const VERSION = 5;
const CATALOG_VERSION = 3;

const server = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
  stdio: 'ignore',
});
const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null });
redis.on('error', () => undefined);

const lua = (tree: string, name: string) => readFileSync(`${tree}/common/src/redis/lua/${name}`, 'utf8');
async function loadTree(tree: string) {
  const source = [
    'metered-store.fragment.lua',
    'metered-credits.fragment.lua',
    'metered-balance.fragment.lua',
  ]
    .map((name) => lua(tree, name))
    .concat(lua(tree, 'eval-gate-batch-8.lua'))
    .join('\n');
  const sha = (await redis.script('LOAD', source)) as string;
  const { gateArguments } = (await import(`${tree}/gateway/src/metering/meter.ts`)) as {
    gateArguments: GateArguments;
  };
  const { meteredOperation } = (await import(`${tree}/gateway/src/metering/metered-operations.ts`)) as {
    meteredOperation: typeof MeteredOperationOf;
  };
  return { tree, sha, gateArguments, meteredOperation };
}
type Tree = Awaited<ReturnType<typeof loadTree>>;

const keys = redisKeys('bench');
const ORG = 'o1';
const START = Date.UTC(2026, 10, 1);
const END = Date.UTC(2026, 11, 1);
const TTL_MS = balanceTtlMs(END, Date.now())!;
// One object, as the gateway's period cache shares it: operations share a term set only with the same period.
const PERIOD = { startMs: START, endMs: END } as MeteredOperation['period'];

function operation(subscriberId: string, kind: MeteredKind): MeteredOperation {
  return {
    kind,
    subscriberId,
    feature: 'calls',
    member: `${subscriberId}|calls|${START}`,
    memberTail: `|calls|${START}`,
    amount: 1,
    limit: 1_000_000_000,
    soft: false,
    source: 'plan',
    period: PERIOD,
    periodEndMs: END,
    ttlMs: TTL_MS,
    catalogVersion: CATALOG_VERSION,
    subscriberVersion: VERSION,
    idempotencyKey: '',
    fingerprint: '',
    terms: '',
    credits: '',
    creditList: [],
  };
}

// Credits: 'held' has an allowance no consume reaches, 'spent' none (every consume spends the first credit with
// something left). Five credits of 10^11 each, priorities and expiries mixed as bench/src/seed.ts makes them.
const CREDIT_FEATURES = { ch: 'held', cs: 'spent' } as const;
type CreditShape = keyof typeof CREDIT_FEATURES;
const creditCatalog: CatalogDoc = {
  features: { held: 'metered', spent: 'metered' },
  plans: {
    pro: {
      archived: false,
      grants: {
        held: {
          kind: 'metered',
          limit: 1_000_000_000_000,
          reset: 'month',
          anchor: 'calendar',
          soft: false,
          rollover: null,
        },
        spent: { kind: 'metered', limit: 0, reset: 'month', anchor: 'calendar', soft: false, rollover: null },
      },
    },
  },
};
const DAY = 86_400_000;
const creditsOf = (subscriber: number, feature: string): CreditDoc[] =>
  [0, 1, 2, 3, 4].map((c) => ({
    id: `cr_${feature}_${subscriber}_${c}`,
    amount: 100_000_000_000,
    priority: 5 + 5 * (c % 3),
    effectiveAt: START - DAY,
    expiresAt: c % 2 === 0 ? null : END + 30 * (c + 1) * DAY,
    createdAt: START - 2 * DAY,
  }));
// One document per subscriber, kept: the gateway caches a spec per document.
const creditSubscribers: SubscriberDoc[] = [];
for (let i = 0; i < SUBSCRIBERS; i++)
  creditSubscribers.push({
    exists: true,
    plans: ['pro'],
    overrides: {},
    credits: { held: creditsOf(i, 'held'), spent: creditsOf(i, 'spent') },
  });

function creditOperation(
  tree: Tree,
  subscriber: number,
  shape: CreditShape,
  nowMs: number,
): MeteredOperation {
  const snapshot = {
    catalog: creditCatalog,
    subscriber: creditSubscribers[subscriber]!,
    catalogVersion: CATALOG_VERSION,
    subscriberVersion: VERSION,
    subscriberStamp: STAMP,
  };
  return tree.meteredOperation(
    snapshot,
    `s${subscriber}`,
    CREDIT_FEATURES[shape],
    'c',
    1,
    nowMs,
    '',
    keys,
    ORG,
  );
}

async function seed() {
  await redis.flushall();
  await redis.hset(keys.arrangement(ORG), 'limit', '', 'blocking', '0', 'burst', '100000000', 'plan', '');
  await redis.hset(keys.catalog(ORG), 'v', CATALOG_VERSION);
  await redis.hset(keys.auth(ORG), 'v', 1);
  const versions: (string | number)[] = ['#w', STAMP];
  for (let i = 0; i < SUBSCRIBERS; i++) versions.push(`s${i}`, VERSION);
  await redis.hset(keys.subscriberVersions(ORG), ...versions);
  await redis.set(keys.meteredReady(ORG), '1');
}

let nextSubscriber = 0;
let nextBatch = 0;
type Shape = MeteredKind | CreditShape | null;
function call(tree: Tree, size: number, kind: Shape) {
  const nowMs = Date.now();
  const evals: EvalGateInput[] = [];
  for (let i = 0; i < size; i++) {
    const subscriber = nextSubscriber++ % SUBSCRIBERS;
    const subscriberId = `s${subscriber}`;
    evals.push({
      organizationId: ORG,
      subscriberId,
      nowMs,
      verified: { verifiedVersion: VERSION, verifiedStamp: STAMP },
      metered:
        kind === null
          ? undefined
          : [
              kind === 'ch' || kind === 'cs'
                ? creditOperation(tree, subscriber, kind, nowMs)
                : operation(subscriberId, kind),
            ],
    });
  }
  const { args } = tree.gateArguments(evals, STAMP, () => [
    keys.meteredBalance(ORG, ''),
    keys.usageIdempotency(ORG, ''),
    keys.meteredDirty(ORG),
    keys.meteredReady(ORG),
  ]);
  return redis.evalsha(
    tree.sha,
    7,
    keys.arrangement(ORG),
    keys.evalUsage(ORG, '2026-11'),
    keys.burst(ORG),
    keys.catalog(ORG),
    keys.auth(ORG),
    keys.gateBatch(ORG, `b${nextBatch++}`),
    keys.subscriberVersions(ORG),
    86_400_000 * 40,
    86_400_000,
    60_000,
    '',
    0,
    ...args,
    kind === null ? '' : Date.now() + 60_000,
  );
}

const info = async (section: string) => {
  const text = await redis.info(section);
  const fields = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0) fields.set(line.slice(0, at), line.slice(at + 1));
  }
  return fields;
};
const usedCpuUs = async () => {
  const cpu = await info('cpu');
  return (Number(cpu.get('used_cpu_sys')) + Number(cpu.get('used_cpu_user'))) * 1e6;
};

async function measure(tree: Tree, size: number, kind: Shape, batches: number) {
  const first = (await call(tree, size, kind)) as unknown[];
  if (first[0] !== 0) throw new Error(`gate reply ${JSON.stringify(first)}`);
  await redis.config('RESETSTAT');
  const cpuBefore = await usedCpuUs();
  const inFlight = 16;
  for (let b = 0; b < batches; b += inFlight) {
    const calls = [];
    for (let k = 0; k < inFlight; k++) calls.push(call(tree, size, kind));
    await Promise.all(calls);
  }
  const cpu = (await usedCpuUs()) - cpuBefore;
  const stats = (await info('commandstats')).get('cmdstat_evalsha') ?? '';
  const usec = Number(/usec=(\d+)/.exec(stats)?.[1]);
  const calls = Number(/calls=(\d+)/.exec(stats)?.[1]);
  const ops = calls * size;
  return { script: usec / ops, server: cpu / ops };
}

async function main() {
  await new Promise((resolve) => setTimeout(resolve, 300));
  await redis.connect();
  // Only a server this run started is flushed and shut down: a port taken by another's Redis ends the run here.
  const serverPid = Number((await info('server')).get('process_id'));
  if (serverPid !== server.pid) {
    redis.disconnect();
    server.kill();
    throw new Error(`Port ${port} is another process's Redis (pid ${serverPid}): pick a free port.`);
  }
  try {
    const trees = [await loadTree(treeA!), await loadTree(treeB!)];
    await seed();
    // SHAPES='16c 16r 1c 16- 16ch 16cs': batch size, then the kind (see the header).
    const shapes = (process.env.SHAPES ?? '1c 16c 16r 16-').split(' ').map((shape): [number, Shape] => {
      const [, size, kind] = /^(\d+)(.+)$/.exec(shape) ?? [];
      return [Number(size), kind === '-' ? null : (kind as Shape)];
    });
    // Every balance exists, as in a steady month: a first pass of each tree's consumes makes them (and, with credits,
    // the credit-spent hashes a consume past the allowance writes).
    const warm = new Set<Shape>([
      'c',
      ...shapes.map(([, kind]) => kind).filter((kind) => kind === 'ch' || kind === 'cs'),
    ]);
    for (const kind of warm)
      for (const tree of trees) for (let i = 0; i < SUBSCRIBERS / 16; i++) await call(tree, 16, kind);
    for (const [size, kind] of shapes) {
      const sums = trees.map(() => ({ script: 0, server: 0 }));
      const ratios: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        // A round alternates the trees by block, ABBA, so a drift of the shared machine's speed weighs on both alike.
        const figures = trees.map(() => ({ script: 0, server: 0 }));
        for (let block = 0; block < BLOCKS; block++) {
          for (const t of block % 2 === 0 ? [0, 1] : [1, 0]) {
            const figure = await measure(trees[t]!, size, kind, BATCHES / BLOCKS);
            figures[t]!.script += figure.script / BLOCKS;
            figures[t]!.server += figure.server / BLOCKS;
          }
        }
        for (let t = 0; t < trees.length; t++) {
          sums[t]!.script += figures[t]!.script;
          sums[t]!.server += figures[t]!.server;
        }
        ratios.push(figures[1]!.server / figures[0]!.server);
      }
      const line = trees.map(
        (tree, t) =>
          `${t === 0 ? 'A' : 'B'} script ${(sums[t]!.script / ROUNDS).toFixed(2)} server ${(sums[t]!.server / ROUNDS).toFixed(2)}`,
      );
      ratios.sort((a, b) => a - b);
      console.log(
        `batch ${size} ${kind ?? 'plain'} (µs/op): ${line.join(' | ')} | B/A server median ${ratios[ROUNDS >> 1]!.toFixed(3)} (${ratios.map((r) => r.toFixed(2)).join(' ')})`,
      );
    }
  } finally {
    await redis.shutdown('NOSAVE').catch(() => undefined);
    redis.disconnect();
    server.kill();
  }
}

await main();
