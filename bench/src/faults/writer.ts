import { exchange, sleep, type Exchange } from './http.ts';
import { FEATURE, type FaultOrganization } from './organization.ts';

export interface WriteRecord {
  seq: number;
  kind: 'override' | 'revoke';
  subscriber: string | null;
  /** The override's limit: distinct for every write of the run, so any value seen names its write. */
  value: number | null;
  gateway: number;
  status: number | null;
  failure: string | null;
  requestId: string | null;
  /** A 503 whose details say the outcome is unknown: admin received the write and died before answering. */
  outcomeUnknown: boolean;
  startedAt: number;
  endedAt: number;
}

export interface Writer {
  records: WriteRecord[];
  /** Revokes the victim key as the stream's next write (or at once when the stream has ended). */
  revoke(): Promise<WriteRecord>;
  /**
   * Later override writes go to these subscribers only. After recovery the stream moves to subscribers the
   * fault never saw, so a write lost during the fault is still the last word on its subscriber.
   */
  redirect(subscribers: string[]): void;
  /** When the write now in flight was sent, or null between writes. */
  inFlightSince(): number | null;
  stop(): Promise<void>;
}

export const isSuccess = (status: number | null) => status !== null && status >= 200 && status < 300;

const outcomeUnknown = (answer: Exchange): boolean =>
  (answer.body as { error?: { details?: { outcome?: unknown } } } | null)?.error?.details?.outcome === 'unknown';

const requestIdOf = (answer: Exchange): string | null => {
  const header = answer.headers?.get('x-request-id');
  if (header) return header;
  const body = answer.body as { error?: { request_id?: unknown } } | null;
  return typeof body?.error?.request_id === 'string' ? body.error.request_id : null;
};

/**
 * Sequential writes through the gateways (alternating, as clients of the one base URL would): override PUTs
 * with distinct values over the subscribers, and the victim key's revocation when asked. Bounded in count
 * and time; every answer, or its absence, is recorded.
 */
export function startWriter(
  org: FaultOrganization,
  gatewayUrls: string[],
  { intervalMs, maxWrites, maxSeconds, firstValue }: { intervalMs: number; maxWrites: number; maxSeconds: number; firstValue: number },
): Writer {
  const records: WriteRecord[] = [];
  const startedAt = Date.now();
  let seq = 0;
  let stopped = false;
  let inFlightSince: number | null = null;
  const revocations: ((record: WriteRecord) => void)[] = [];
  let targets = org.subscribers.slice(0, 4);

  const write = async (kind: WriteRecord['kind']): Promise<WriteRecord> => {
    const n = seq++;
    const gateway = n % gatewayUrls.length;
    const base = gatewayUrls[gateway]!;
    const subscriber = kind === 'override' ? targets[n % targets.length]! : null;
    const value = kind === 'override' ? firstValue + n : null;
    inFlightSince = Date.now();
    const answer =
      kind === 'override'
        ? await exchange({
            method: 'PUT',
            url: `${base}/org/subscribers/${subscriber}/overrides/${FEATURE}`,
            apiKey: org.apiKey,
            body: { kind: 'limit', limit: value },
          })
        : await exchange({
            method: 'DELETE',
            url: `${base}/org/service-accounts/${org.serviceAccountId}/api-keys/${org.victim.keyId}`,
            apiKey: org.apiKey,
          });
    inFlightSince = null;
    const record: WriteRecord = {
      seq: n,
      kind,
      subscriber,
      value,
      gateway,
      status: answer.status,
      failure: answer.failure,
      requestId: requestIdOf(answer),
      outcomeUnknown: answer.status === 503 && outcomeUnknown(answer),
      startedAt: answer.startedAt,
      endedAt: answer.endedAt,
    };
    records.push(record);
    return record;
  };

  const loop = (async () => {
    while (!stopped && seq < maxWrites && Date.now() - startedAt < maxSeconds * 1000) {
      const revocation = revocations.shift();
      if (revocation) revocation(await write('revoke'));
      else await write('override');
      await sleep(intervalMs);
    }
    stopped = true;
    for (const revocation of revocations.splice(0)) revocation(await write('revoke'));
  })();

  return {
    records,
    inFlightSince: () => inFlightSince,
    redirect: (subscribers) => {
      targets = subscribers;
    },
    revoke: () => (stopped ? write('revoke') : new Promise((resolve) => revocations.push(resolve))),
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
