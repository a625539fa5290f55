import type { AuditEvent } from '../../api/types.ts';

const COLUMNS: readonly [string, (event: AuditEvent) => unknown][] = [
  ['id', (e) => e.id],
  ['occurred_at', (e) => e.occurred_at],
  ['request_id', (e) => e.request_id],
  ['actor_member_id', (e) => e.actor.member_id],
  ['actor_auth_type', (e) => e.actor.auth_type],
  ['actor_key_prefix', (e) => e.actor.key_prefix],
  ['service', (e) => e.service],
  ['method', (e) => e.method],
  ['route', (e) => e.route],
  ['params', (e) => JSON.stringify(e.params)],
  ['ip', (e) => e.ip],
  ['user_agent', (e) => e.user_agent],
  ['outcome', (e) => e.outcome],
  ['status', (e) => e.status],
  ['details', (e) => (e.details === null ? null : JSON.stringify(e.details))],
];

/** RFC 4180: quote every field that holds a quote, comma or line break; doubles inner quotes. */
function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  // A leading = + - @ would be read as a formula by spreadsheets.
  const safe = /^[=+\-@]/.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export const auditCsv = (events: readonly AuditEvent[]): string =>
  [
    COLUMNS.map(([name]) => name).join(','),
    ...events.map((e) => COLUMNS.map(([, get]) => csvField(get(e))).join(',')),
  ].join('\r\n') + '\r\n';

export const auditJson = (events: readonly AuditEvent[]): string =>
  `${JSON.stringify({ audit_events: events }, null, 2)}\n`;

/** Saves `text` as a file, in the browser, from what is already loaded (nothing is sent anywhere). */
export function download(filename: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
