import type { FastifyRequest } from 'fastify';
import { validationError } from '@ent/common/errors/app-error';

/** U+0000: Postgres text and jsonb cannot hold it, so no stored value ever contains it. */
export const hasNulCharacter = (value: string): boolean => value.includes('\u0000');

/** The dotted path (as `error.details.field` names fields) of the first string holding U+0000, or null. */
export function findNulCharacter(value: unknown, path: string[] = []): string | null {
  if (typeof value === 'string') return hasNulCharacter(value) ? path.join('.') : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNulCharacter(value[i], [...path, String(i)]);
      if (found !== null) return found;
    }
    return null;
  }
  if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      if (hasNulCharacter(key)) return [...path, key.replaceAll('\u0000', '\\u0000')].join('.');
      const found = findNulCharacter(inner, [...path, key]);
      if (found !== null) return found;
    }
  }
  return null;
}

const PARTS = [
  ['params', 'params'],
  ['query', 'querystring'],
  ['body', 'body'],
] as const;

/**
 * preValidation hook of every /org route: a NUL character in a path value, a query parameter or a body string
 * is a client mistake (422 VALIDATION_ERROR naming the field): Postgres refuses NUL in text, which would otherwise
 * surface as a 500 (a 503 on audited writes). Runs after the audit entry is recorded, so such a write is still logged.
 */
export async function refuseNulCharacters(request: FastifyRequest): Promise<void> {
  for (const [part, location] of PARTS) {
    const field = findNulCharacter(request[part]);
    if (field !== null) {
      throw validationError(`${field || location} must not contain NUL (U+0000) characters.`, {
        field: field || location,
        location,
      });
    }
  }
}
