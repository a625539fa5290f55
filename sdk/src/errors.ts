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
  | (string & {});

/** The service's error body (SPEC.md part 7). */
export interface ErrorBody {
  error: { type: string; code: string; message: string; request_id?: string; details?: Record<string, unknown> };
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

  constructor(init: {
    code: ErrorCode;
    message: string;
    status?: number | null;
    type?: string | null;
    requestId?: string | null;
    details?: Record<string, unknown>;
    retryAfterSeconds?: number | null;
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
export function errorFromResponse(status: number, body: unknown, retryAfterSeconds: number | null): EntitlementsError {
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
    });
  }
  return new EntitlementsError({
    code: CODE_BY_STATUS[status] ?? (status >= 500 ? 'SERVICE_UNAVAILABLE' : `HTTP_${status}`),
    message: `The service answered ${status}.`,
    status,
    retryAfterSeconds,
  });
}
