import { useState } from 'react';

/**
 * A form over a record that may change elsewhere while it is open (the API, another tab): a field shows the latest
 * record's value until the user edits it, and only the fields the user changed are sent, so saving one field never
 * writes back another's old value over a newer one.
 */
export function useEditedFields<T extends Record<string, unknown>>(latest: T) {
  const [edits, setEdits] = useState<Partial<T>>({});
  const valueOf = <K extends keyof T>(field: K): T[K] =>
    field in edits ? (edits[field] as T[K]) : latest[field];
  const edit = <K extends keyof T>(field: K, value: T[K]) =>
    setEdits((current) => ({ ...current, [field]: value }));
  /** The fields whose edited value differs from the latest record's. */
  const changed = (): Partial<T> =>
    Object.fromEntries(
      Object.entries(edits).filter(([field, value]) => value !== latest[field]),
    ) as Partial<T>;
  const reset = () => setEdits({});
  return { valueOf, edit, changed, reset };
}
