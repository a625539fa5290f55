import { isApiError } from '../api/errors.ts';

export interface FormErrors {
  /** The message for an input, when the API named it (`details.field`, e.g. `key` or `organization.slug`). */
  of(field: string): string | undefined;
  /** The error when it names no input of this form (shown above the form). */
  general: unknown;
}

/** Splits a failed submit into the input it names (shown inline) or a general notice. */
export function formErrors(error: unknown, fields: readonly string[]): FormErrors {
  if (!error) return { of: () => undefined, general: null };
  const named = isApiError(error) ? error.field : undefined;
  const match = named
    ? fields.find(
        (field) => named === field || named.startsWith(`${field}.`) || named.startsWith(`${field}[`),
      )
    : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return {
    of: (field) => (match === field ? message : undefined),
    general: match ? null : error,
  };
}
