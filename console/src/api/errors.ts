/** SPEC part 7: the body of every non-2xx answer. */
export interface ErrorBody {
  error: {
    type?: string;
    code: string;
    message: string;
    request_id?: string;
    details?: Record<string, unknown>;
  };
}

/** A non-2xx answer (or a network failure, status 0) as the pages show it. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;
  readonly requestId: string | undefined;
  /** Seconds from `Retry-After`, when the answer carried one. */
  readonly retryAfter: number | undefined;

  constructor(options: {
    status: number;
    code: string;
    message: string;
    details?: Record<string, unknown>;
    requestId?: string;
    retryAfter?: number;
  }) {
    super(options.message);
    this.name = 'ApiError';
    this.status = options.status;
    this.code = options.code;
    this.details = options.details ?? {};
    this.requestId = options.requestId;
    this.retryAfter = options.retryAfter;
  }

  /** The request field the error names (`details.field`), for showing it beside that input. */
  get field(): string | undefined {
    const field = this.details.field;
    return typeof field === 'string' ? field : undefined;
  }
}

const isErrorBody = (value: unknown): value is ErrorBody => {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const error = (value as { error: unknown }).error;
  return typeof error === 'object' && error !== null && 'message' in error && 'code' in error;
};

function retryAfterOf(response: Response): number | undefined {
  const header = response.headers.get('retry-after');
  if (header === null) return undefined;
  const seconds = Number(header);
  return Number.isFinite(seconds) ? Math.max(0, Math.ceil(seconds)) : undefined;
}

export function apiErrorOf(response: Response, body: unknown): ApiError {
  const retryAfter = retryAfterOf(response);
  if (isErrorBody(body)) {
    return new ApiError({
      status: response.status,
      code: body.error.code,
      message: body.error.message,
      ...(body.error.details ? { details: body.error.details } : {}),
      ...(body.error.request_id ? { requestId: body.error.request_id } : {}),
      ...(retryAfter !== undefined ? { retryAfter } : {}),
    });
  }
  return new ApiError({
    status: response.status,
    code: `HTTP_${response.status}`,
    message: `The server answered ${response.status} ${response.statusText}`.trim(),
    ...(retryAfter !== undefined ? { retryAfter } : {}),
  });
}

export const networkError = (cause: unknown): ApiError =>
  new ApiError({
    status: 0,
    code: 'NETWORK_ERROR',
    message: `The service could not be reached (${cause instanceof Error ? cause.message : String(cause)}).`,
  });

export const isApiError = (error: unknown): error is ApiError => error instanceof ApiError;
