import type pg from 'pg';
import { auditEntriesOf, replacedLimit, type AuditEntry } from './audit.ts';
import { converge } from './converge.ts';
import { exchange } from './http.ts';
import type { EvalLog, EvalRecord } from './load.ts';
import { FEATURE, type FaultOrganization } from './organization.ts';
import { isSuccess, type WriteRecord } from './writer.ts';

/** Which 2xx evals the month's count must equal (see the table's notes for the wording of each). */
export type CountRule =
  | { kind: 'all' }
  | { kind: 'killed-gateway'; gateway: number };

export interface Verification {
  org: FaultOrganization;
  evals: EvalLog;
  writes: WriteRecord[];
  gatewayUrls: string[];
  /** The owner's pool on the run's Postgres: the source of truth the gateways must agree with. */
  pool: pg.Pool;
  countRule: CountRule;
  /** While Postgres was stopped: every write sent and answered inside it must be a 503. */
  postgresOutage?: { from: number; to: number };
}

export interface Findings {
  failures: string[];
  notes: string[];
  lostWrites: number;
  count: { expected: number; allowedExtra: number; actual: number | null; error: number | null; rule: string };
  /** From the start of verification (the load stopped) until the last invariant held; null if one never did. */
  convergedMs: number | null;
}

/** An override's state: its limit, or null for "no override" (the plan's value applies). */
type OverrideState = number | null;
const show = (state: OverrideState | undefined) => (state === undefined ? '?' : state === null ? 'none' : String(state));

const is5xxOther = (status: number | null) => status !== null && status >= 500 && status !== 503;

function expectedCount(evals: EvalRecord[], rule: CountRule): { expected: number; allowedExtra: number; rule: string } {
  const ok = evals.filter((e) => isSuccess(e.status));
  if (rule.kind === 'killed-gateway') {
    const cut = evals.filter((e) => e.gateway === rule.gateway && e.status === null && e.failure !== 'ECONNREFUSED').length;
    return {
      expected: ok.length,
      allowedExtra: cut,
      rule: `count = every 2xx, plus at most the ${cut} evals cut off in flight by the kill (gated, answer lost; never refused at connect)`,
    };
  }
  return { expected: ok.length, allowedExtra: 0, rule: 'count = every 2xx eval seen (metered and fail-open alike)' };
}

async function postgresOverrides(pool: pg.Pool, organizationId: string): Promise<Map<string, OverrideState>> {
  const { rows } = await pool.query<{ subscriber_id: string; limit_value: string | number | null }>(
    `SELECT o.subscriber_id, o.limit_value FROM overrides o JOIN features f ON f.id = o.feature_id
     WHERE o.organization_id = $1 AND f.key = $2`,
    [organizationId, FEATURE],
  );
  return new Map(rows.map((row) => [row.subscriber_id, row.limit_value === null ? null : Number(row.limit_value)]));
}

async function keyRevokedInPostgres(pool: pg.Pool, keyId: string): Promise<boolean> {
  const { rows } = await pool.query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM api_keys WHERE id = $1', [keyId]);
  return rows[0]?.revoked === true;
}

export async function verify(v: Verification): Promise<Findings> {
  const failures: string[] = [];
  const notes: string[] = [];
  const verifyStart = Date.now();
  const convergedAt: (number | null)[] = [];
  const adminGateway = v.gatewayUrls[0]!;

  // Answers that are never acceptable, whatever the fault.
  for (const write of v.writes) {
    if (is5xxOther(write.status)) failures.push(`write #${write.seq} (${write.kind}) answered ${write.status}`);
  }
  const evals5xx = v.evals.records.filter((e) => is5xxOther(e.status));
  if (evals5xx.length) failures.push(`${evals5xx.length} evals answered 5xx other than 503 (${[...new Set(evals5xx.map((e) => e.status))].join(', ')})`);

  if (v.postgresOutage) {
    const { from, to } = v.postgresOutage;
    const inside = v.writes.filter((w) => w.startedAt >= from && w.endedAt <= to);
    if (inside.length === 0) failures.push('no write was sent and answered while Postgres was stopped');
    for (const write of inside) {
      if (write.status !== 503) failures.push(`write #${write.seq} during the Postgres outage answered ${write.status ?? write.failure}, not 503`);
    }
    notes.push(`${inside.length} writes fell inside the Postgres outage`);
  }

  // Every 2xx write audited `responded` with its status.
  const succeeded = v.writes.filter((w) => isSuccess(w.status));
  const audit = new Map<number, AuditEntry>();
  const auditSeen = new Map<number, string>();
  const auditWait = converge(async () => {
    for (const write of succeeded) {
      if (audit.has(write.seq) || !write.requestId) continue;
      const entries = await auditEntriesOf(adminGateway, v.org.apiKey, write.requestId);
      if (typeof entries === 'string') {
        auditSeen.set(write.seq, `the audit read failed: ${entries}`);
        continue;
      }
      const responded = entries.find((e) => e.outcome === 'responded');
      if (responded) audit.set(write.seq, responded);
      else auditSeen.set(write.seq, entries.length ? `outcome ${entries.map((e) => e.outcome).join('/')}` : 'no entry');
    }
    return audit.size === succeeded.length;
  });

  // The revoked key refused on every gateway (and revoked in Postgres).
  const revoked = v.writes.find((w) => w.kind === 'revoke' && isSuccess(w.status));
  const revocationWait = revoked
    ? converge(async () => {
        if (!(await keyRevokedInPostgres(v.pool, v.org.victim.keyId))) return false;
        const answers = await Promise.all(v.gatewayUrls.map((_, g) => v.evals.evaluate(g, v.org.subscribers[0]!, 'check', true)));
        return answers.every((a) => a.status === 401);
      })
    : Promise.resolve(null);

  // What every gateway serves equals what Postgres holds, for every subscriber written to.
  const overrideWrites = v.writes.filter((w) => w.kind === 'override');
  const written = [...new Set(overrideWrites.map((w) => w.subscriber!))];
  let truth = new Map<string, OverrideState>();
  let served = new Map<string, OverrideState[]>();
  const valuesWait = converge(async () => {
    truth = await postgresOverrides(v.pool, v.org.organizationId);
    const observed = new Map<string, OverrideState[]>();
    for (const subscriber of written) {
      const answers = await Promise.all(v.gatewayUrls.map((_, g) => v.evals.evaluate(g, subscriber, 'check')));
      observed.set(
        subscriber,
        answers.map((a) => {
          const body = a.body as { limit?: number | null; source?: string } | null;
          if (a.status !== 200 || !body) return Number.NaN;
          return body.source === 'override' ? (body.limit ?? null) : null;
        }),
      );
    }
    served = observed;
    return written.every((s) => observed.get(s)!.every((value) => value === (truth.get(s) ?? null)));
  });

  const [auditAt, revocationAt, valuesAt] = await Promise.all([auditWait, revocationWait, valuesWait]);
  convergedAt.push(auditAt, revocationAt, valuesAt);

  const unaudited = succeeded.filter((w) => !audit.has(w.seq));
  for (const write of unaudited) {
    failures.push(`write #${write.seq} (${write.kind}, ${write.status}) has no 'responded' audit entry (${auditSeen.get(write.seq) ?? 'no request id'})`);
  }
  for (const [seq, entry] of audit) {
    const write = succeeded.find((w) => w.seq === seq)!;
    if (entry.status !== write.status) failures.push(`write #${seq} answered ${write.status} but is audited ${entry.status}`);
  }
  // A 503 write did not run: never audited as a success; during the Postgres outage, never `responded` at all.
  // A 503 that says its outcome is unknown (admin died after receiving it) may have been applied; the others
  // must not have been.
  for (const write of v.writes.filter((w) => w.status === 503 && !w.outcomeUnknown && w.requestId)) {
    const entries = await auditEntriesOf(adminGateway, v.org.apiKey, write.requestId!);
    if (typeof entries === 'string') {
      failures.push(`write #${write.seq} answered 503; its audit entries could not be read: ${entries}`);
      continue;
    }
    const responded = entries.filter((e) => e.outcome === 'responded');
    const duringOutage = v.postgresOutage && write.startedAt >= v.postgresOutage.from && write.endedAt <= v.postgresOutage.to;
    const wrong = responded.filter((e) => duringOutage || isSuccess(e.status));
    if (wrong.length) failures.push(`write #${write.seq} answered 503 but is audited responded ${wrong.map((e) => e.status).join('/')}`);
  }
  if (!revoked) failures.push('the victim key was never revoked with a 2xx (every attempt failed)');
  else if (revocationAt === null) failures.push('the revoked key is still accepted on some gateway (or not revoked in Postgres)');

  // Per subscriber: which states may be current (the last 2xx write's, or that of any later write whose
  // outcome is unknown), and whether a refused (503) write ever took effect.
  let lostWrites = 0;
  for (const subscriber of written) {
    const mine = overrideWrites.filter((w) => w.subscriber === subscriber).sort((a, b) => a.seq - b.seq);
    const refused = new Map(mine.filter((w) => w.status === 503 && !w.outcomeUnknown).map((w) => [w.value!, w]));
    let possible: OverrideState[] = [null];
    for (const write of mine) {
      if (isSuccess(write.status)) {
        const entry = audit.get(write.seq);
        if (entry) {
          const replaced = replacedLimit(entry.details);
          const from: OverrideState | undefined = replaced.created ? null : (replaced.from as OverrideState);
          if (!possible.includes(from ?? null)) {
            const culprit = typeof from === 'number' ? refused.get(from) : undefined;
            failures.push(
              culprit
                ? `write #${culprit.seq} answered 503 yet took effect (write #${write.seq} replaced its value ${from})`
                : `write #${write.seq} on ${subscriber} replaced ${show(from)}, expected one of ${possible.map(show).join('/')}`,
            );
          }
        }
        possible = [write.value];
      } else if (write.outcomeUnknown || (write.status !== 503 && !(write.status !== null && write.status < 500))) {
        possible.push(write.value); // no answer, a 503 of unknown outcome, or another 5xx: it may have been applied
      }
    }
    const inPostgres = truth.get(subscriber) ?? null;
    if (!possible.includes(inPostgres)) {
      const culprit = inPostgres === null ? undefined : refused.get(inPostgres);
      failures.push(
        culprit
          ? `write #${culprit.seq} answered 503 yet Postgres holds its value for ${subscriber}`
          : `Postgres holds ${show(inPostgres)} for ${subscriber}, expected one of ${possible.map(show).join('/')}`,
      );
    }
    const values = served.get(subscriber) ?? [];
    const truthPosition = mine.findIndex((w) => w.value === inPostgres);
    let lostHere = 0;
    values.forEach((value, g) => {
      if (value === inPostgres) return;
      failures.push(`gateway-${g + 1} serves ${Number.isNaN(value) ? 'an error' : show(value)} for ${subscriber}, Postgres holds ${show(inPostgres)}`);
      // Lost: every committed write after the one whose value this gateway serves (2xx, or the one Postgres holds).
      const position = mine.findIndex((w) => w.value === value);
      const lost = mine.filter((w, i) => i > position && (isSuccess(w.status) || i === truthPosition)).length;
      lostHere = Math.max(lostHere, lost);
    });
    lostWrites += lostHere;
  }

  // The month's count, once the load and every verification eval are over.
  const { expected, allowedExtra, rule } = expectedCount(v.evals.records, v.countRule);
  const seen: { count: number | null; steadySince: number; problem: string | null } = { count: null, steadySince: Date.now(), problem: null };
  const readCounts = async () => {
    const answers = await Promise.all(
      v.gatewayUrls.map(async (url) => {
        const answer = await exchange({ method: 'GET', url: `${url}/org/usage/current`, apiKey: v.org.apiKey });
        const count = (answer.body as { count?: unknown } | null)?.count;
        if (answer.status === 200 && typeof count === 'number') return count;
        seen.problem = `${url}/org/usage/current -> ${answer.status ?? answer.failure} ${JSON.stringify(answer.body).slice(0, 200)}`;
        return Number.NaN;
      }),
    );
    if (answers.every((c) => c === answers[0])) return answers[0]!;
    if (!answers.some((c) => Number.isNaN(c))) seen.problem = `the gateways disagree on the count: ${answers.join(' vs ')}`;
    return Number.NaN;
  };
  const countAt = await converge(
    async () => {
      const count = await readCounts();
      if (count !== seen.count) seen.steadySince = Date.now();
      if (!Number.isNaN(count)) seen.count = count;
      return count >= expected && count <= expected + allowedExtra;
    },
    undefined,
    // Too high and steady for 5 s: more waiting cannot bring it down.
    () => seen.count !== null && seen.count > expected + allowedExtra && Date.now() - seen.steadySince > 5000,
  );
  convergedAt.push(countAt);
  const finalCount = seen.count;
  const error = finalCount === null ? null : finalCount < expected ? finalCount - expected : Math.max(0, finalCount - expected - allowedExtra);
  if (countAt === null) {
    const range = `${expected}${allowedExtra ? ` to ${expected + allowedExtra}` : ''}`;
    failures.push(`eval count ${finalCount ?? 'unreadable'}, expected ${range}${seen.problem ? ` (last problem: ${seen.problem})` : ''}`);
  }
  if (lostWrites) failures.push(`${lostWrites} committed write(s) never reached every gateway`);

  return {
    failures,
    notes,
    lostWrites,
    count: { expected, allowedExtra, actual: finalCount, error, rule },
    convergedMs: convergedAt.some((at) => at === null) ? null : Math.max(...convergedAt.map((at) => at! - verifyStart), 0),
  };
}
