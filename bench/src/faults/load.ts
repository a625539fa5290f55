import { exchange, type Exchange } from './http.ts';
import { FEATURE, METERED_CONSUMED, type FaultOrganization } from './organization.ts';

/**
 * `consume`: the check route deducting 1 of the metered feature (an eval like the others); `metered-check`: the check
 * of a metered feature named with the call, deducting nothing (how the metered rows read used back).
 */
export type EvalRoute = 'check' | 'list' | 'list-all' | 'consume' | 'metered-check';

export interface EvalRecord {
  gateway: number;
  subscriber: string;
  victimKey: boolean;
  route: EvalRoute;
  status: number | null;
  failure: string | null;
  /** Answered 2xx with eval headers: counted by the gate call in Redis (not a fail-open answer). */
  metered: boolean;
  /** A consume answered 200: whether it was deducted (`allowed`); null for every other eval or answer. */
  allowed: boolean | null;
  startedAt: number;
  endedAt: number;
}

/** Every eval the run sends, load and verification alike, so the count check sees all of them. */
export interface EvalLog {
  records: EvalRecord[];
  evaluate(
    gateway: number,
    subscriber: string,
    route: EvalRoute,
    victimKey?: boolean,
    meteredFeature?: string,
  ): Promise<Exchange>;
}

export function createEvalLog(org: FaultOrganization, gatewayUrls: string[]): EvalLog {
  const records: EvalRecord[] = [];
  return {
    records,
    async evaluate(gateway, subscriber, route, victimKey = false, meteredFeature = METERED_CONSUMED) {
      const base = `${gatewayUrls[gateway]}/org/subscribers/${subscriber}/entitlements`;
      const apiKey = victimKey ? org.victim.apiKey : org.apiKey;
      const answer =
        route === 'check' || route === 'consume' || route === 'metered-check'
          ? await exchange({
              method: 'POST',
              url: `${base}/check`,
              apiKey,
              body:
                route === 'check'
                  ? { feature: FEATURE }
                  : route === 'consume'
                    ? { feature: METERED_CONSUMED, consume: 1 }
                    : { feature: meteredFeature },
            })
          : await exchange({ method: 'GET', url: route === 'list-all' ? `${base}?all=true` : base, apiKey });
      const ok = answer.status !== null && answer.status >= 200 && answer.status < 300;
      const allowed = (answer.body as { allowed?: unknown } | null)?.allowed;
      records.push({
        gateway,
        subscriber,
        victimKey,
        route,
        status: answer.status,
        failure: answer.failure,
        metered: ok && answer.headers?.get('x-svc-eval-used') !== null,
        allowed: route === 'consume' && answer.status === 200 && typeof allowed === 'boolean' ? allowed : null,
        startedAt: answer.startedAt,
        endedAt: answer.endedAt,
      });
      return answer;
    },
  };
}

export interface Load {
  /** Stops sending and waits for every request in flight (each is bounded by the request timeout). */
  stop(): Promise<void>;
  sent(): number;
}

const TICK_MS = 25;
/** After an event-loop stall the generator catches up at most this many requests per tick. */
const MAX_PER_TICK = 20;
/** A hung target must not pile up unbounded requests. */
const MAX_IN_FLIGHT = 1500;

/**
 * Evals at a fixed rate, alternating the gateways, walking the subscribers, two thirds on the check route and
 * a third on the list route (half of those with ?all=true). Bounded: stops by itself after `maxSeconds`.
 */
export function startLoad(log: EvalLog, subscribers: string[], gateways: number, ratePerSecond: number, maxSeconds: number): Load {
  const startedAt = Date.now();
  const limit = Math.ceil(ratePerSecond * maxSeconds);
  let sent = 0;
  const inFlight = new Set<Promise<unknown>>();
  const send = () => {
    const i = sent++;
    const route: EvalRoute = i % 3 !== 0 ? 'check' : i % 6 === 0 ? 'list-all' : 'list';
    const subscriber = subscribers[Math.floor(i / gateways) % subscribers.length]!;
    const request = log.evaluate(i % gateways, subscriber, route).finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const timer = setInterval(() => {
    const elapsed = Date.now() - startedAt;
    if (elapsed > maxSeconds * 1000 || sent >= limit) return clearInterval(timer);
    const due = Math.min(limit, Math.floor((elapsed * ratePerSecond) / 1000)) - sent;
    for (let n = 0; n < Math.min(due, MAX_PER_TICK) && inFlight.size < MAX_IN_FLIGHT; n++) send();
  }, TICK_MS);
  return {
    sent: () => sent,
    async stop() {
      clearInterval(timer);
      await Promise.all([...inFlight]);
    },
  };
}
