import { exchange, sleep, type Exchange } from './http.ts';
import type { EvalLog } from './load.ts';
import { METERED_REPORTED, type FaultOrganization } from './organization.ts';
import { isSuccess } from './writer.ts';

/** One report (single or a batch's event), with every attempt to deliver it under its one idempotency key. */
export interface ReportRecord {
  subscriber: string;
  delta: number;
  key: string;
  /** The batch it went in, or null for a single report (`POST /org/subscribers/{id}/usage`). */
  batch: number | null;
  attempts: { gateway: number; status: number | null; failure: string | null; startedAt: number }[];
  /** Some attempt was answered 2xx for it (for a batch event: the batch 2xx and its result a check result). */
  acknowledged: boolean;
}

export interface MeteredLoad {
  reports: ReportRecord[];
  /** Stops sending and waits for every request in flight. */
  stop(): Promise<void>;
  /**
   * Sends every report not yet acknowledged again, under its key, as the SDK does once the service is back
   * (alternating the gateways, `rounds` times at most, a second apart, for `maxMs` at most).
   */
  retryUnacknowledged(rounds: number, maxMs: number): Promise<void>;
}

const TICK_MS = 25;
/** A hung target must not pile up unbounded requests. */
const MAX_IN_FLIGHT = 500;
const BATCH_EVENTS = 10;

/**
 * Consumes of 1 (through the eval log: a consume is an eval, counted like the others) and reports with an idempotency
 * key each, single and in batches, at fixed rates, alternating the gateways and walking `subscribers`. Bounded: stops
 * by itself after `maxSeconds`.
 */
export function startMeteredLoad(
  org: FaultOrganization,
  evals: EvalLog,
  gatewayUrls: string[],
  subscribers: string[],
  {
    consumesPerSecond,
    reportsPerSecond,
    maxSeconds,
  }: { consumesPerSecond: number; reportsPerSecond: number; maxSeconds: number },
): MeteredLoad {
  const startedAt = Date.now();
  const reports: ReportRecord[] = [];
  const inFlight = new Set<Promise<unknown>>();
  const tag = `${startedAt.toString(36)}`;
  let consumes = 0;
  let reportTicks = 0;
  let batches = 0;

  const track = (request: Promise<unknown>) => {
    const tracked = request.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  };
  const sendReports = async (records: ReportRecord[], gateway: number) => {
    const base = gatewayUrls[gateway]!;
    const attemptAt = Date.now();
    let answer: Exchange;
    if (records[0]!.batch === null) {
      const [record] = records as [ReportRecord];
      answer = await exchange({
        method: 'POST',
        url: `${base}/org/subscribers/${record.subscriber}/usage`,
        apiKey: org.apiKey,
        body: { feature: METERED_REPORTED, delta: record.delta },
        headers: { 'idempotency-key': record.key },
      });
    } else {
      answer = await exchange({
        method: 'POST',
        url: `${base}/org/usage-events`,
        apiKey: org.apiKey,
        body: {
          events: records.map((r) => ({
            subscriber_id: r.subscriber,
            feature: METERED_REPORTED,
            delta: r.delta,
            idempotency_key: r.key,
          })),
        },
      });
    }
    const results = (answer.body as { results?: { used?: unknown }[] } | null)?.results;
    records.forEach((record, i) => {
      record.attempts.push({ gateway, status: answer.status, failure: answer.failure, startedAt: attemptAt });
      const applied =
        record.batch === null
          ? isSuccess(answer.status)
          : isSuccess(answer.status) && typeof results?.[i]?.used === 'number';
      if (applied) record.acknowledged = true;
    });
  };
  const newReport = (subscriberAt: number, batch: number | null, n: number): ReportRecord => {
    const record: ReportRecord = {
      subscriber: subscribers[subscriberAt % subscribers.length]!,
      delta: 1 + (n % 3),
      key: `${tag}-${batch === null ? 's' : `b${batch}`}-${n}`,
      batch,
      attempts: [],
      acknowledged: false,
    };
    reports.push(record);
    return record;
  };

  const timer = setInterval(() => {
    const elapsed = Date.now() - startedAt;
    if (elapsed > maxSeconds * 1000) return clearInterval(timer);
    if (inFlight.size >= MAX_IN_FLIGHT) return;
    // Catch up at most a few requests per tick after a stall.
    for (
      let due = Math.floor((elapsed * consumesPerSecond) / 1000) - consumes, n = 0;
      n < Math.min(due, 10);
      n++
    ) {
      const i = consumes++;
      track(
        evals.evaluate(
          i % gatewayUrls.length,
          subscribers[Math.floor(i / gatewayUrls.length) % subscribers.length]!,
          'consume',
        ),
      );
    }
    // Single reports at their rate; with every tenth, a batch of BATCH_EVENTS events.
    for (
      let due = Math.floor((elapsed * reportsPerSecond) / 1000) - reportTicks, n = 0;
      n < Math.min(due, 10);
      n++
    ) {
      const i = reportTicks++;
      track(sendReports([newReport(i, null, i)], i % gatewayUrls.length));
      if (i % 10 === 0) {
        const batch = batches++;
        const events = Array.from({ length: BATCH_EVENTS }, (_, e) => newReport(i + e, batch, e));
        track(sendReports(events, (i + 1) % gatewayUrls.length));
      }
    }
  }, TICK_MS);

  return {
    reports,
    async stop() {
      clearInterval(timer);
      await Promise.all([...inFlight]);
    },
    async retryUnacknowledged(rounds, maxMs) {
      const deadline = Date.now() + maxMs;
      for (let round = 0; round < rounds && Date.now() < deadline; round++) {
        const pending = reports.filter((r) => !r.acknowledged);
        if (pending.length === 0) return;
        if (round > 0) await sleep(1000);
        const singles = pending.filter((r) => r.batch === null);
        const byBatch = new Map<number, ReportRecord[]>();
        for (const r of pending.filter((p) => p.batch !== null))
          byBatch.set(r.batch!, [...(byBatch.get(r.batch!) ?? []), r]);
        for (const [i, events] of [...byBatch.values()].entries()) {
          if (Date.now() < deadline) await sendReports(events, (round + i + 1) % gatewayUrls.length);
        }
        for (const [i, record] of singles.entries()) {
          if (Date.now() < deadline) await sendReports([record], (round + i) % gatewayUrls.length);
        }
      }
    },
  };
}
