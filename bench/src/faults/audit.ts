import { exchange } from './http.ts';

export interface AuditEntry {
  request_id: string;
  outcome: string;
  status: number | null;
  details: Record<string, unknown> | null;
}

/** The entries of one request (normally one), read as a user reads them: GET /org/audit-events?request_id=. */
export async function auditEntriesOf(gatewayUrl: string, apiKey: string, requestId: string): Promise<AuditEntry[] | string> {
  const answer = await exchange({ method: 'GET', url: `${gatewayUrl}/org/audit-events?request_id=${encodeURIComponent(requestId)}`, apiKey });
  const body = answer.body as { audit_events?: AuditEntry[] } | null;
  if (answer.status !== 200 || !body?.audit_events) return `${answer.status ?? answer.failure} ${JSON.stringify(answer.body).slice(0, 200)}`;
  return body.audit_events;
}

/**
 * The limit an override PUT replaced, from its audit details: `undefined` when the PUT created the override
 * (details name an override_id), the `from` of the limit change otherwise; `null` as `from` means unlimited.
 */
export function replacedLimit(details: Record<string, unknown> | null): { created: true } | { created: false; from: unknown } {
  if (details && 'override_id' in details) return { created: true };
  const change = details?.limit as { from?: unknown } | undefined;
  return { created: false, from: change?.from };
}
