export type ErrorType =
  'invalid_request_error' | 'authentication_error' | 'permission_error' | 'rate_limit_error' | 'api_error';

export type ErrorCode =
  | 'VALIDATION_ERROR'
  | 'CONFLICT'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'NOT_FOUND'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'RATE_LIMITED'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'METHOD_NOT_ALLOWED'
  | 'BAD_REQUEST'
  | 'REQUEST_TIMEOUT'
  | 'REQUEST_HEADERS_TOO_LARGE'
  | 'SERVICE_UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'INTERNAL_ERROR';

export interface ErrorDetails {
  field?: string;
  value?: unknown;
  [key: string]: unknown;
}

export interface ErrorBody {
  error: {
    type: ErrorType;
    code: ErrorCode;
    message: string;
    request_id: string;
    /** Always present (SPEC.md part 7 lists it as an object): `{}` when there is nothing to add. */
    details: ErrorDetails;
  };
}

const typeByStatus: Record<number, ErrorType> = {
  401: 'authentication_error',
  403: 'permission_error',
  429: 'rate_limit_error',
};

/** The one error class every client-visible failure is expressed with; the error handler renders it. */
export class AppError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly type: ErrorType;
  readonly details: ErrorDetails | undefined;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    details?: ErrorDetails,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = status;
    this.code = code;
    this.type = typeByStatus[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    this.details = details;
    this.headers = headers;
  }

  toBody(requestId: string): ErrorBody {
    const error: ErrorBody['error'] = {
      type: this.type,
      code: this.code,
      message: this.message,
      request_id: requestId,
      details: this.details ?? {},
    };
    return { error };
  }
}

export const validationError = (message: string, details?: ErrorDetails) =>
  new AppError(422, 'VALIDATION_ERROR', message, details);
export const conflict = (message: string, details?: ErrorDetails) =>
  new AppError(409, 'CONFLICT', message, details);
export const notFound = (message: string, details?: ErrorDetails) =>
  new AppError(404, 'NOT_FOUND', message, details);
/** The 404 of a route that does not exist (also given where a route must look absent to this caller). */
export const noRoute = (method: string, url: string) => notFound(`No route ${method} ${url.split('?')[0]}.`);
export const unauthenticated = (message = 'A valid X-API-Key header is required.') =>
  new AppError(401, 'UNAUTHENTICATED', message);
export const forbidden = (message: string, details?: ErrorDetails) =>
  new AppError(403, 'FORBIDDEN', message, details);
export const serviceUnavailable = (message: string, details?: ErrorDetails) =>
  new AppError(503, 'SERVICE_UNAVAILABLE', message, details);
export const rateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'RATE_LIMITED', 'Too many requests on the eval routes; retry later.', undefined, {
    'retry-after': String(retryAfterSeconds),
  });
