/** Load generation with autocannon: keep-alive connections, a different subscriber on every request. */
import autocannon from 'autocannon';
import {
  CREDITS_HELD_FEATURE,
  CREDITS_SPENT_FEATURE,
  featureKey,
  METERED_EVENTS_FEATURE,
  METERED_FEATURE,
} from './seed.ts';

/**
 * `consume`: the check route deducting 1 of the metered feature; `metered-check`: the same check without deducting;
 * `usage-events`: `POST /org/usage-events`, a batch of `batchEvents` reports of 1 (to the events feature) over as many
 * subscribers; `consume-credits-held` and `consume-credits-spent`: a consume of 1 of a feature on which every subscriber
 * holds live credits, with the allowance left (credits read, not spent) or none (credits spent).
 */
export type RouteKind =
  | 'check'
  | 'list'
  | 'ofrep'
  | 'consume'
  | 'metered-check'
  | 'usage-events'
  | 'consume-credits-held'
  | 'consume-credits-spent';

const consumedFeature = {
  consume: METERED_FEATURE,
  'consume-credits-held': CREDITS_HELD_FEATURE,
  'consume-credits-spent': CREDITS_SPENT_FEATURE,
} as const;

export interface LoadFigures {
  rps: number;
  p50: number;
  p95: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** Requests answered with each status code. */
  statuses: Record<string, number>;
}

export interface LoadOptions {
  url: string;
  apiKey: string;
  route: RouteKind;
  subscribers: number;
  features: number;
  connections: number;
  /** Seconds, or a request count with `amount`. */
  seconds?: number;
  amount?: number;
  /** Where in the scattered walk over subscribers this load starts (spreads concurrent loads apart). */
  offset?: number;
  /** Requests per second across all connections (default: as fast as the server answers). */
  overallRate?: number;
  /** `usage-events`: events per batch (default 1,000), and whether each carries an idempotency key of its own. */
  batchEvents?: number;
  idempotencyKeys?: boolean;
}

const STEP = 7919; // a prime: walks every subscriber in a scattered order

const json = (apiKey: string) => ({ 'content-type': 'application/json', 'x-api-key': apiKey });

/** A unique tag per load, so idempotency keys of two runs against one Redis never meet. */
const runTag = () => `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

/** One batch of `events` reports of 1, to the subscribers that follow `n` in the scattered walk. */
function usageEvents(n: number, options: LoadOptions, batch: number, tag: string) {
  const events = [];
  let subscriber = n;
  for (let i = 0; i < (options.batchEvents ?? 1000); i++) {
    subscriber = (subscriber + STEP) % options.subscribers;
    events.push({
      subscriber_id: `sub-${subscriber}`,
      feature: METERED_EVENTS_FEATURE,
      delta: 1,
      ...(options.idempotencyKeys ? { idempotency_key: `${tag}-${batch}-${i}` } : {}),
    });
  }
  return JSON.stringify({ events });
}

function requestFor(route: RouteKind, apiKey: string, subscriber: string, feature: string) {
  switch (route) {
    case 'check':
      return {
        method: 'POST' as const,
        path: `/org/subscribers/${subscriber}/entitlements/check`,
        headers: json(apiKey),
        body: JSON.stringify({ feature }),
      };
    case 'consume':
    case 'consume-credits-held':
    case 'consume-credits-spent':
    case 'metered-check':
      return {
        method: 'POST' as const,
        path: `/org/subscribers/${subscriber}/entitlements/check`,
        headers: json(apiKey),
        body: JSON.stringify(
          route === 'metered-check'
            ? { feature: METERED_FEATURE }
            : { feature: consumedFeature[route], consume: 1 },
        ),
      };
    case 'usage-events':
      return { method: 'POST' as const, path: '/org/usage-events', headers: json(apiKey) };
    case 'list':
      return {
        method: 'GET' as const,
        path: `/org/subscribers/${subscriber}/entitlements?all=true`,
        headers: { 'x-api-key': apiKey },
      };
    case 'ofrep':
      return {
        method: 'POST' as const,
        path: `/ofrep/v1/evaluate/flags/${feature}`,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ context: { targetingKey: subscriber } }),
      };
  }
}

/** The q-quantile of recorded latencies (ms): autocannon's own summary has no p95. */
const quantile = (sorted: Float64Array, q: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/**
 * How long a timed load waits, once its time is up, for the answers of the requests it already sent. Autocannon's
 * own `duration` closes the connections with a request in flight on each: the server still applies those (a consume
 * deducts) but their answers are never counted, so a count of 2xx answers would fall short of what was applied by
 * one request per connection. A request timing out (autocannon's 10 s) ends its connection sooner than this bound.
 */
const DRAIN_BOUND_MS = 15_000;

/** The fields of autocannon's client (lib/httpClient.js) that end it after the answer it waits for. */
interface DrainableClient {
  reqsMade: number;
  responseMax?: number;
  destroy(): void;
}

/**
 * Stops `clients` sending: each one ends once the request it has in flight is answered (autocannon ends a client
 * whose requests made reach its `responseMax`, after counting the answer), and ends now if it never sent one.
 */
function drainClients(clients: DrainableClient[]): void {
  for (const client of clients) {
    if (client.reqsMade === 0) client.destroy();
    else client.responseMax = client.reqsMade;
  }
}

export function drive(options: LoadOptions): Promise<LoadFigures> {
  let n = options.offset ?? 0;
  let batch = 0;
  const tag = runTag();
  let latencies = new Float64Array(1 << 16);
  let recorded = 0;
  const timed = !options.amount;
  const seconds = options.seconds ?? 10;
  const clients: DrainableClient[] = [];
  const timers: NodeJS.Timeout[] = [];
  const startedAt = performance.now();
  let lastAnswerAt = startedAt;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        // Timed: autocannon's duration is only the backstop; the load stops sending at `seconds` (below).
        ...(timed
          ? { duration: seconds + Math.ceil((2 * DRAIN_BOUND_MS) / 1000) }
          : { amount: options.amount }),
        pipelining: 1,
        ...(options.overallRate ? { overallRate: options.overallRate } : {}),
        setupClient: (client) => clients.push(client as unknown as DrainableClient),
        requests: [
          {
            setupRequest: (request) => {
              n = (n + STEP) % options.subscribers;
              return {
                ...request,
                ...requestFor(
                  options.route,
                  options.apiKey,
                  `sub-${n}`,
                  featureKey(n % options.features, options.features),
                ),
                ...(options.route === 'usage-events' ? { body: usageEvents(n, options, batch++, tag) } : {}),
              };
            },
          },
        ],
      },
      (error, result) => {
        for (const timer of timers) clearTimeout(timer);
        if (error) return reject(error);
        const statuses: Record<string, number> = {};
        for (const [status, stat] of Object.entries(result.statusCodeStats ?? {}))
          statuses[status] = stat?.count ?? 0;
        const sorted = latencies.subarray(0, recorded).sort();
        const answeringSeconds = (lastAnswerAt - startedAt) / 1000;
        resolve({
          // Answers over the time they took, the drain included: autocannon's per-second samples would count the
          // drain's part second as a whole one.
          rps: timed ? recorded / Math.max(answeringSeconds, 1e-3) : result.requests.average,
          p50: quantile(sorted, 0.5),
          p95: quantile(sorted, 0.95),
          p99: quantile(sorted, 0.99),
          requests: result.requests.total,
          non2xx: result.non2xx,
          errors: result.errors,
          statuses,
        });
      },
    );
    if (timed) {
      timers.push(
        setTimeout(() => {
          drainClients(clients);
          timers.push(setTimeout(() => instance.stop(), DRAIN_BOUND_MS));
        }, seconds * 1000),
      );
    }
    instance.on('response', (_client: unknown, _status: number, _bytes: number, milliseconds: number) => {
      if (recorded === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[recorded++] = milliseconds;
      lastAnswerAt = performance.now();
    });
  });
}
