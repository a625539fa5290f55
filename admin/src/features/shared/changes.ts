export interface Change<T = unknown> {
  from: T;
  to: T;
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * `{field: {from, to}}` for each named field whose value differs (fields absent from `after` are not being
 * changed); null when nothing changed, as the audit log's details require.
 */
export function changedFields<T extends object>(
  before: T,
  after: Partial<T>,
  fields: readonly (keyof T & string)[],
): Record<string, Change> | null {
  const changes: Record<string, Change> = {};
  for (const field of fields) {
    if (!(field in after) || after[field] === undefined) continue;
    if (!same(before[field], after[field])) changes[field] = { from: before[field], to: after[field] };
  }
  return Object.keys(changes).length ? changes : null;
}
