import type { FastifyRequest } from 'fastify';
import { validationError } from '@ent/common/errors/app-error';

/** Most characters an idempotency key may hold (the batch's `idempotency_key` has the same bound). */
const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** The request's `Idempotency-Key` header ('' when absent); 422 when repeated, empty or too long. */
export function idempotencyKeyOf(request: FastifyRequest): string {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return '';
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw validationError(
      `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters, given once.`,
      {
        field: 'Idempotency-Key',
      },
    );
  }
  return value;
}
