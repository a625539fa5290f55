/**
 * The scale mode's metered phase (DESIGN.md §5): consumes of 1 against hard limits and reports with idempotency keys,
 * spread over three gateways at once. Each subscriber's consumes answered `allowed: true` must be exactly
 * min(attempts, limit); the used figure read back afterwards (`GET /org/subscribers/{id}/usage`) must equal them, and
 * for the reported feature the sum of the reports acknowledged (a repeat of an idempotency key, sent to another
 * gateway, applied once).
 */
import { Pool } from 'undici';
import { log } from '../harness.ts';
import { METERED_EVENTS_FEATURE, METERED_FEATURE } from '../seed.ts';

export interface MeteredScale {
  subscribers: number;
  consumes: {
    attempts: number;
    /** Σ min(attempts, limit) over the subscribers: what must be allowed. */
    expectedAllowed: number;
    allowed: number;
    denied: number;
    /** Answers other than 200, by status (or failure). */
    other: Record<string, number>;
    /** Subscribers whose allowed consumes differ from min(attempts, limit). */
    subscribersOff: number;
    /** Σ max(0, allowed - limit): consumes allowed beyond a limit. */
    overConsumed: number;
    /** Σ used read back afterwards. */
    usedReadBack: number;
    perSecond: number;
  };
  reports: {
    /** Distinct reports (single and batch events) and repeats of them under the same key to another gateway. */
    sent: number;
    repeats: number;
    /** Single reports repeated, and those answered with `Idempotent-Replayed: true` (a batch's events say nothing). */
    singleRepeats: number;
    replayed: number;
    acknowledged: number;
    other: Record<string, number>;
    /** Σ of the deltas acknowledged, against the Σ used read back. */
    expectedUsed: number;
    usedReadBack: number;
    subscribersOff: number;
  };
  /** Whether the three gateways answered the same used figures. */
  gatewaysAgree: boolean;
  /** How used was read back: the usage route, or (a gateway without it) the check (absent from older results). */
  readBackRoute?: 'GET /org/subscribers/{id}/usage' | 'POST .../entitlements/check';
}

interface Answer {
  status: number | null;
  failure: string | null;
  body: unknown;
  replayed: boolean;
}

const CONSUMERS_PER_GATEWAY = 8;
const REPORTERS_PER_GATEWAY = 2;
const REPORTS_PER_SUBSCRIBER = 20;
const BATCHES = 12;
const EVENTS_PER_BATCH = 100;
/** Attempts per subscriber as a multiple of its limit: below it, at it, above it. */
const ATTEMPT_FACTORS = [0.5, 0.9, 1, 1.5, 3];

/** A small deterministic PRNG (mulberry32): the same interleaving every run. */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(items: T[], next: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

const count = (tally: Record<string, number>, key: string) => (tally[key] = (tally[key] ?? 0) + 1);

export async function meteredPhase(
  apiKey: string,
  urls: string[],
  subscriberCount: number,
): Promise<MeteredScale> {
  const pools = urls.map(
    (url) => new Pool(url, { connections: CONSUMERS_PER_GATEWAY + REPORTERS_PER_GATEWAY + 2 }),
  );
  const call = async (
    gateway: number,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    idempotencyKey?: string,
  ): Promise<Answer> => {
    try {
      const res = await pools[gateway]!.request({
        method,
        path,
        headers: {
          'x-api-key': apiKey,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await res.body.text();
      return {
        status: res.statusCode,
        failure: null,
        body: text ? (JSON.parse(text) as unknown) : null,
        replayed: res.headers['idempotent-replayed'] === 'true',
      };
    } catch (error) {
      return {
        status: null,
        failure: (error as { code?: string }).code ?? String(error),
        body: null,
        replayed: false,
      };
    }
  };
  try {
    const subscribers = Array.from({ length: subscriberCount }, (_, s) => `sub-${s}`);
    // Each subscriber's limit, as the gateway answers it (its plans' largest).
    const limits = new Map<string, number>();
    for (const [s, subscriber] of subscribers.entries()) {
      const answer = await call(
        s % urls.length,
        'POST',
        `/org/subscribers/${subscriber}/entitlements/check`,
        {
          feature: METERED_FEATURE,
        },
      );
      const limit = (answer.body as { limit?: unknown } | null)?.limit;
      if (answer.status !== 200 || typeof limit !== 'number')
        throw new Error(
          `the metered check of ${subscriber} answered ${answer.status}: ${JSON.stringify(answer.body)}`,
        );
      limits.set(subscriber, limit);
    }
    const attempts = new Map(
      subscribers.map((subscriber, s) => [
        subscriber,
        Math.round(limits.get(subscriber)! * ATTEMPT_FACTORS[s % ATTEMPT_FACTORS.length]!),
      ]),
    );
    const next = random(34);
    const queue = shuffle(
      subscribers.flatMap((subscriber) => Array<string>(attempts.get(subscriber)!).fill(subscriber)),
      next,
    );
    const queues = urls.map((_, g) => queue.filter((_, i) => i % urls.length === g));
    const allowed = new Map<string, number>();
    const consumes = { allowed: 0, denied: 0, other: {} as Record<string, number> };
    const consumer = async (gateway: number) => {
      for (let subscriber = queues[gateway]!.pop(); subscriber; subscriber = queues[gateway]!.pop()) {
        const answer = await call(gateway, 'POST', `/org/subscribers/${subscriber}/entitlements/check`, {
          feature: METERED_FEATURE,
          consume: 1,
        });
        const verdict = (answer.body as { allowed?: unknown } | null)?.allowed;
        if (answer.status === 200 && verdict === true) {
          consumes.allowed++;
          allowed.set(subscriber, (allowed.get(subscriber) ?? 0) + 1);
        } else if (answer.status === 200 && verdict === false) consumes.denied++;
        else count(consumes.other, String(answer.status ?? answer.failure));
      }
    };

    // Reports: single reports and batches with a key each; some sent again, under the same key, to another gateway.
    const acknowledgedDelta = new Map<string, number>();
    const reports = {
      sent: 0,
      repeats: 0,
      singleRepeats: 0,
      replayed: 0,
      acknowledged: 0,
      other: {} as Record<string, number>,
    };
    const acknowledge = (subscriber: string, delta: number) => {
      reports.acknowledged++;
      acknowledgedDelta.set(subscriber, (acknowledgedDelta.get(subscriber) ?? 0) + delta);
    };
    const tag = Date.now().toString(36);
    type Report = { subscriber: string; delta: number; key: string };
    const singles: Report[] = shuffle(
      subscribers.flatMap((subscriber) =>
        Array.from({ length: REPORTS_PER_SUBSCRIBER }, (_, k) => ({
          subscriber,
          delta: 1 + (k % 5),
          key: `${tag}-single-${subscriber}-${k}`,
        })),
      ),
      next,
    );
    const batches: Report[][] = Array.from({ length: BATCHES }, (_, b) =>
      Array.from({ length: EVENTS_PER_BATCH }, (_, i) => ({
        subscriber: subscribers[Math.floor(next() * subscribers.length)]!,
        delta: 1 + (i % 3),
        key: `${tag}-batch-${b}-${i}`,
      })),
    );
    let singleAt = 0;
    let batchAt = 0;
    const reporter = async (gateway: number, which: number) => {
      // One reporter per gateway sends the batches, the others the single reports.
      if (which === 0) {
        for (let b = batchAt++; b < batches.length; b = batchAt++) {
          const events = batches[b]!;
          const body = {
            events: events.map((e) => ({
              subscriber_id: e.subscriber,
              feature: METERED_EVENTS_FEATURE,
              delta: e.delta,
              idempotency_key: e.key,
            })),
          };
          reports.sent += events.length;
          const first = await call(gateway, 'POST', '/org/usage-events', body);
          const results = (first.body as { results?: { used?: unknown }[] } | null)?.results;
          if (first.status !== 200 || !results) {
            for (let i = 0; i < events.length; i++)
              count(reports.other, String(first.status ?? first.failure));
            continue;
          }
          events.forEach((e, i) => {
            if (typeof results[i]?.used === 'number') acknowledge(e.subscriber, e.delta);
            else count(reports.other, 'event error');
          });
          if (b % 3 === 0) {
            reports.repeats += events.length;
            const again = await call((gateway + 1) % urls.length, 'POST', '/org/usage-events', body);
            if (again.status !== 200) count(reports.other, `repeat ${again.status ?? again.failure}`);
          }
        }
        return;
      }
      for (let r = singleAt++; r < singles.length; r = singleAt++) {
        const { subscriber, delta, key } = singles[r]!;
        const path = `/org/subscribers/${subscriber}/usage`;
        reports.sent++;
        const first = await call(gateway, 'POST', path, { feature: METERED_EVENTS_FEATURE, delta }, key);
        if (first.status === 200) acknowledge(subscriber, delta);
        else count(reports.other, String(first.status ?? first.failure));
        if (r % 5 === 0) {
          reports.repeats++;
          reports.singleRepeats++;
          const again = await call(
            (gateway + 1) % urls.length,
            'POST',
            path,
            { feature: METERED_EVENTS_FEATURE, delta },
            key,
          );
          if (again.status === 200 && again.replayed) reports.replayed++;
          else if (again.status !== 200) count(reports.other, `repeat ${again.status ?? again.failure}`);
        }
      }
    };

    log(
      `metered: ${queue.length} consumes of 1 against ${subscriberCount} subscribers' hard limits and ` +
        `${singles.length + BATCHES * EVENTS_PER_BATCH} reports, over the three gateways at once`,
    );
    const started = performance.now();
    await Promise.all(
      urls.flatMap((_, g) => [
        ...Array.from({ length: CONSUMERS_PER_GATEWAY }, () => consumer(g)),
        ...Array.from({ length: REPORTERS_PER_GATEWAY }, (_, which) => reporter(g, which)),
      ]),
    );
    const seconds = (performance.now() - started) / 1000;

    // What each gateway reads back, once the figures stop moving (bounded: 20 reads a second apart). The usage route
    // if the gateway has it, else the check of each feature (an eval: nothing counts evals any more by now).
    let readBackRoute: MeteredScale['readBackRoute'] = 'GET /org/subscribers/{id}/usage';
    const usedOf = async (gateway: number, subscriber: string, feature: string) => {
      const answer = await call(gateway, 'POST', `/org/subscribers/${subscriber}/entitlements/check`, {
        feature,
      });
      const used = (answer.body as { used?: unknown } | null)?.used;
      return answer.status === 200 && typeof used === 'number' ? used : Number.NaN;
    };
    const readBack = async (gateway: number) => {
      const used = new Map<string, [number, number]>();
      for (const subscriber of subscribers) {
        if (readBackRoute === 'POST .../entitlements/check') {
          used.set(subscriber, [
            await usedOf(gateway, subscriber, METERED_FEATURE),
            await usedOf(gateway, subscriber, METERED_EVENTS_FEATURE),
          ]);
          continue;
        }
        const answer = await call(gateway, 'GET', `/org/subscribers/${subscriber}/usage`);
        const usage = (answer.body as { usage?: { feature: string; used: number }[] } | null)?.usage;
        if (answer.status === 404 && !usage) {
          log(`GET /org/subscribers/{id}/usage answered 404: reading used from the check instead`);
          readBackRoute = 'POST .../entitlements/check';
          return readBack(gateway);
        }
        const of = (feature: string) => usage?.find((u) => u.feature === feature)?.used ?? Number.NaN;
        used.set(subscriber, [of(METERED_FEATURE), of(METERED_EVENTS_FEATURE)]);
      }
      return used;
    };
    const same = (a: Map<string, [number, number]>, b: Map<string, [number, number]>) =>
      [...a].every(([s, [c, r]]) => b.get(s)?.[0] === c && b.get(s)?.[1] === r);
    let readings = await Promise.all(urls.map((_, g) => readBack(g)));
    for (let attempt = 0; attempt < 20; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const again = await Promise.all(urls.map((_, g) => readBack(g)));
      const steady = again.every((reading, g) => same(reading, readings[g]!));
      readings = again;
      if (steady) break;
    }
    const first = readings[0]!;
    let consumeOff = 0;
    let overConsumed = 0;
    let reportOff = 0;
    let consumedUsed = 0;
    let reportedUsed = 0;
    let expectedAllowed = 0;
    for (const subscriber of subscribers) {
      const limit = limits.get(subscriber)!;
      const mine = allowed.get(subscriber) ?? 0;
      const [consumed, reported] = first.get(subscriber)!;
      expectedAllowed += Math.min(attempts.get(subscriber)!, limit);
      if (mine !== Math.min(attempts.get(subscriber)!, limit) || consumed !== mine) consumeOff++;
      overConsumed += Math.max(0, mine - limit);
      if (reported !== (acknowledgedDelta.get(subscriber) ?? 0)) reportOff++;
      consumedUsed += consumed;
      reportedUsed += reported;
    }
    return {
      subscribers: subscriberCount,
      consumes: {
        attempts: queue.length,
        expectedAllowed,
        allowed: consumes.allowed,
        denied: consumes.denied,
        other: consumes.other,
        subscribersOff: consumeOff,
        overConsumed,
        usedReadBack: consumedUsed,
        perSecond: queue.length / seconds,
      },
      reports: {
        ...reports,
        expectedUsed: [...acknowledgedDelta.values()].reduce((sum, d) => sum + d, 0),
        usedReadBack: reportedUsed,
        subscribersOff: reportOff,
      },
      gatewaysAgree: readings.every((reading) => same(reading, first)),
      readBackRoute,
    };
  } finally {
    await Promise.all(pools.map((pool) => pool.close()));
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const others = (tally: Record<string, number>) =>
  Object.keys(tally).length === 0
    ? 'none'
    : Object.entries(tally)
        .map(([k, n]) => `${n} × ${k}`)
        .join(', ');

export function renderMeteredScale(m: MeteredScale): string[] {
  const c = m.consumes;
  const r = m.reports;
  return [
    '',
    `Metered, on the three gateways at once: ${fmt(c.attempts)} consumes of 1 against the hard limits of ` +
      `${m.subscribers} subscribers (attempts 0.5, 0.9, 1, 1.5 and 3 times the limit; ${fmt(c.perSecond)} consumes/s), ` +
      `while ${fmt(r.sent)} reports (single and in batches of 100, an idempotency key each) ran, ${fmt(r.repeats)} of ` +
      'them sent again under the same key to another gateway:',
    '',
    '| | must be | measured | subscribers off |',
    '|---|---|---|---|',
    `| consumes allowed | ${fmt(c.expectedAllowed)} (Σ min(attempts, limit)) | ${fmt(c.allowed)} (${fmt(c.denied)} refused, ` +
      `over the limit ${c.overConsumed}) | ${c.subscribersOff} |`,
    `| used read back (${m.readBackRoute ?? 'GET /org/subscribers/{id}/usage'}), consumed feature | ${fmt(c.allowed)} | ` +
      `${fmt(c.usedReadBack)} | |`,
    `| used read back, reported feature | ${fmt(r.expectedUsed)} (Σ acknowledged) | ${fmt(r.usedReadBack)} | ${r.subscribersOff} |`,
    '',
    `Single reports repeated answered as replays (\`Idempotent-Replayed: true\`): ${fmt(r.replayed)} of ` +
      `${fmt(r.singleRepeats)} (a repeated batch's events are checked by the used figures alone); other answers: consumes ${others(c.other)}, ` +
      `reports ${others(r.other)}; the three gateways read back ${m.gatewaysAgree ? 'the same' : 'DIFFERENT'} figures.`,
  ];
}
