import { decodeTime, encodeTime, monotonicFactory } from 'ulidx';
import type { Selectable } from 'kysely';
import type { AuditEventsTable } from '@ent/common/db/database';
import { isWellFormedApiKey } from '@ent/common/auth/api-key';
import type { AuditEventBody, AuditOutcomeName } from '@ent/contract/audit';
import { parseDateTime } from '@ent/common/http/date-time';

/** A details field whose JSON is larger than this is recorded as `{ too_large: true }` (the field still named). */
const AUDIT_FIELD_MAX_BYTES = 2048;
const TOO_LARGE = Object.freeze({ too_large: true });
export const USER_AGENT_MAX_LENGTH = 512;

const MAX_ULID_TIME = 2 ** 48 - 1;

/**
 * An entry id whose ULID time is the moment the request was received, and that moment as `occurred_at`: both
 * come from the same value, so "newest first by id" is also "newest first by occurred_at", and a time window
 * is an exact id range (the primary key answers it). Monotonic: a later id never sorts before an earlier one.
 * Each admin app makes its own (audit/plugin.ts), so an app on a test's manual clock set ahead never moves the ids
 * of another app in the same process.
 */
export function auditEntryIds(): (receivedAt: number) => { id: string; occurredAt: Date } {
  const nextUlid = monotonicFactory();
  return (receivedAt) => {
    const ulid = nextUlid(Math.min(Math.max(Math.floor(receivedAt), 0), MAX_ULID_TIME));
    return { id: `aud_${ulid.toLowerCase()}`, occurredAt: new Date(decodeTime(ulid)) };
  };
}

/** The smallest entry id recorded at or after `ms`: `occurred_at >= t` is exactly `id >= auditIdFloor(t)`. */
export const auditIdFloor = (ms: number): string =>
  `aud_${encodeTime(Math.min(Math.max(Math.ceil(ms), 0), MAX_ULID_TIME), 10).toLowerCase()}${'0'.repeat(16)}`;

/** RFC 3339 to epoch milliseconds, rounding a sub-millisecond fraction up (entries carry whole milliseconds). */
export function rfc3339ToMs(value: string): number {
  const ms = parseDateTime(value);
  const fraction = /\.(\d+)/.exec(value)?.[1] ?? '';
  return /[1-9]/.test(fraction.slice(3)) ? ms + 1 : ms;
}

/** Fastify's `/org/plans/:key` as the audit log writes it: `/org/plans/{key}`. */
export const routeTemplate = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** A path value as recorded: U+0000 (which Postgres cannot store) becomes U+FFFD, so the entry is still written. */
export const recordableParam = (value: unknown): string => String(value).replaceAll('\u0000', '\uFFFD');

/**
 * A whole API key (a key prefix is 8 characters of the secret part), a webhook signing secret, or an invite link
 * (`…/join/<token>`, the token 43 base64url characters, percent-encoded or not).
 */
const SECRET_PATTERNS = [
  /svc-mk-1-[A-Za-z0-9]{20,}/,
  /whsec_[A-Za-z0-9+/=_-]{16,}/,
  /\/join\/[A-Za-z0-9_%-]{32,}/,
];

const looksSecret = (value: string): boolean =>
  isWellFormedApiKey(value) || SECRET_PATTERNS.some((p) => p.test(value));

/** Defence in depth: handlers never put secrets in details, but a string that looks like one is never stored. */
function withoutSecrets(value: unknown): unknown {
  if (typeof value === 'string') return looksSecret(value) ? '[redacted]' : value;
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, withoutSecrets(inner)]));
  }
  return value;
}

/** The details as recorded: secrets scrubbed, each oversized field replaced by `{ too_large: true }`. */
export function recordableDetails(details: Record<string, unknown> | null): Record<string, unknown> | null {
  if (!details || Object.keys(details).length === 0) return null;
  const recorded: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(details)) {
    const clean = withoutSecrets(value);
    const size = Buffer.byteLength(JSON.stringify(clean) ?? 'null');
    recorded[field] = size > AUDIT_FIELD_MAX_BYTES ? TOO_LARGE : clean === undefined ? null : clean;
  }
  return recorded;
}

/** An entry as the read route selects it: the appended row and its latest outcome. */
export type AuditEntryRow = Omit<Selectable<AuditEventsTable>, 'recorded_at'> & {
  outcome: AuditOutcomeName | null;
  status: number | null;
  details: Record<string, unknown> | null;
};

export const toAuditEventBody = (row: AuditEntryRow): AuditEventBody => {
  const outcome = row.outcome ?? 'pending';
  return {
    id: row.id,
    occurred_at: row.occurred_at.toISOString(),
    request_id: row.request_id,
    organization_id: row.organization_id,
    actor: {
      member_id: row.actor_member_id,
      auth_type: row.actor_auth_type,
      key_prefix: row.actor_key_prefix,
    },
    service: row.service,
    method: row.method,
    route: row.route,
    params: row.params,
    ip: row.ip,
    user_agent: row.user_agent,
    outcome,
    status: outcome === 'responded' ? row.status : null,
    details: row.details,
  };
};
