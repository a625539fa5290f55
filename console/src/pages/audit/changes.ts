import { meteredTermsText, type MeteredTerms } from '../../components/metered-terms.ts';

/**
 * An audit entry's `details` as rows to read (SPEC part 2, "Details by write"): a change is `{from, to}`; a
 * create names what it created; plan grant changes are keyed by feature (`grants.<feature>`); a field too large
 * to record is `{too_large: true}`.
 */
export type DetailRow =
  | { path: string; kind: 'change'; from: unknown; to: unknown }
  | { path: string; kind: 'value'; value: unknown }
  | { path: string; kind: 'too_large' };

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isChange = (value: Record<string, unknown>) => {
  const keys = Object.keys(value);
  return keys.length === 2 && 'from' in value && 'to' in value;
};

const isTooLarge = (value: Record<string, unknown>) =>
  value.too_large === true && Object.keys(value).length === 1;

/** Objects whose fields are themselves changes or values are walked (grants by feature); others are values. */
function walk(path: string, value: unknown, rows: DetailRow[]): void {
  if (!isObject(value)) {
    rows.push({ path, kind: 'value', value });
    return;
  }
  if (isTooLarge(value)) {
    rows.push({ path, kind: 'too_large' });
    return;
  }
  if (isChange(value)) {
    rows.push({ path, kind: 'change', from: value.from, to: value.to });
    return;
  }
  const entries = Object.entries(value);
  const nested = entries.some(([, v]) => isObject(v) && (isChange(v) || isTooLarge(v)));
  if (!nested && path) {
    rows.push({ path, kind: 'value', value });
    return;
  }
  for (const [key, inner] of entries) walk(path ? `${path}.${key}` : key, inner, rows);
}

export function detailRows(details: Record<string, unknown> | null): DetailRow[] {
  if (!details) return [];
  const rows: DetailRow[] = [];
  for (const [key, value] of Object.entries(details)) {
    if (key === 'grants' && isObject(value) && !isChange(value) && !isTooLarge(value)) {
      for (const [feature, grant] of Object.entries(value)) walk(`grants.${feature}`, grant, rows);
    } else {
      walk(key, value, rows);
    }
  }
  return rows;
}

const RESETS: readonly unknown[] = ['day', 'week', 'month', 'year', 'never'];
const ANCHORS: readonly unknown[] = ['calendar', 'subscription'];

/** A metered grant as the audit log files it: `{kind, limit, reset, reset_anchor, soft}`. */
const isMeteredGrant = (value: unknown): value is MeteredTerms =>
  isObject(value) &&
  value.kind === 'metered' &&
  (value.limit === null || typeof value.limit === 'number') &&
  RESETS.includes(value.reset) &&
  ANCHORS.includes(value.reset_anchor) &&
  typeof value.soft === 'boolean';

/** A value as the details view writes it: `null` is "none" (for grants: not on the plan). */
export function describe(value: unknown): string {
  if (value === null) return 'none';
  if (value === undefined) return '—';
  if (typeof value === 'string') return value;
  if (isObject(value) && value.kind === 'flag' && Object.keys(value).length === 1) return 'flag';
  if (isObject(value) && value.kind === 'limit' && 'limit' in value) {
    return `limit ${value.limit === null ? 'unlimited' : String(value.limit)}`;
  }
  if (isMeteredGrant(value)) return `metered ${meteredTermsText(value)}`;
  return JSON.stringify(value);
}
