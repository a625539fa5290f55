/** Codes the service sends in `error.code`, plus the SDK's own for failures that never reached an answer. */
export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'VALIDATION_ERROR'
  | 'RATE_LIMITED'
  | 'SERVICE_UNAVAILABLE'
  | 'TIMEOUT'
  | 'NETWORK_ERROR'
  | 'CLIENT_CLOSED'
  | 'UNEXPECTED_RESPONSE'
  | (string & {});

/** The service's error body (SPEC.md part 7). */
export interface ErrorBody {
  error: {
    type: string;
    code: string;
    message: string;
    request_id?: string;
    details?: Record<string, unknown>;
  };
}

/** Every failure the SDK reports: branch on `code`, never on the message. */
export class EntitlementsError extends Error {
  readonly code: ErrorCode;
  /** HTTP status, or null when no response arrived (timeout, connection refused). */
  readonly status: number | null;
  readonly type: string | null;
  readonly requestId: string | null;
  readonly details: Record<string, unknown>;
  /** Seconds from the last Retry-After header, when the service sent one. */
  readonly retryAfterSeconds: number | null;
  /**
   * The idempotency key the failed call sent (a consume, a report): a later call with the same key is applied at
   * most once, even when the service applied this one and its answer was lost.
   */
  readonly idempotencyKey: string | null;

  constructor(init: {
    code: ErrorCode;
    message: string;
    status?: number | null;
    type?: string | null;
    requestId?: string | null;
    details?: Record<string, unknown>;
    retryAfterSeconds?: number | null;
    idempotencyKey?: string | null;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'EntitlementsError';
    this.code = init.code;
    this.status = init.status ?? null;
    this.type = init.type ?? null;
    this.requestId = init.requestId ?? null;
    this.details = init.details ?? {};
    this.retryAfterSeconds = init.retryAfterSeconds ?? null;
    this.idempotencyKey = init.idempotencyKey ?? null;
  }
}

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  422: 'VALIDATION_ERROR',
  429: 'RATE_LIMITED',
  503: 'SERVICE_UNAVAILABLE',
};

const isErrorBody = (body: unknown): body is ErrorBody =>
  typeof body === 'object' &&
  body !== null &&
  typeof (body as ErrorBody).error === 'object' &&
  typeof (body as ErrorBody).error?.code === 'string';

/** An error from a non-2xx answer; bodies that are not the service's (a proxy's 502) get a code by status. */
export function errorFromResponse(
  status: number,
  body: unknown,
  retryAfterSeconds: number | null,
  idempotencyKey: string | null = null,
): EntitlementsError {
  if (isErrorBody(body)) {
    const { error } = body;
    return new EntitlementsError({
      code: error.code,
      message: error.message,
      status,
      type: error.type,
      requestId: error.request_id ?? null,
      details: error.details ?? {},
      retryAfterSeconds,
      idempotencyKey,
    });
  }
  return new EntitlementsError({
    code: CODE_BY_STATUS[status] ?? (status >= 500 ? 'SERVICE_UNAVAILABLE' : `HTTP_${status}`),
    message: `The service answered ${status}.`,
    status,
    retryAfterSeconds,
    idempotencyKey,
  });
}

/**
 * 4xx statuses that mean "the service cannot answer now": 408 the request did not reach it in time (transient,
 * like the SDK's own timeout), 409 the organization's monthly evals are blocked, 429 the burst limit.
 */
const OUTAGE_STATUSES = new Set([408, 409, 429]);

/**
 * Whether a failure means "the service cannot answer now" (answered stale or with a fallback) rather than a
 * mistake in the call (thrown). The status decides, never the body's `error.code`: a 500 with the service's
 * own INTERNAL_ERROR body is as much an outage as a proxy's bare 502, and a code the SDK does not know yet must
 * not turn an outage into an exception.
 */
export function isOutage(error: unknown): error is EntitlementsError {
  if (!(error instanceof EntitlementsError)) return false;
  // No response at all: the SDK's own timeout or a connection that could not be made or broke.
  if (error.status === null) return error.code === 'TIMEOUT' || error.code === 'NETWORK_ERROR';
  return error.status >= 500 || OUTAGE_STATUSES.has(error.status);
}
