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

/** What a notice shows of an error: one sentence for the reader, and the facts to quote to support behind it. */
export interface ErrorPresentation {
  sentence: string;
  /** Status, code, request id (and the service's own words where the sentence replaces them); may be empty. */
  details: { label: string; value: string }[];
}

const asSentence = (text: string): string => {
  const trimmed = text.trim();
  if (!trimmed) return 'Something went wrong.';
  const capitalized = trimmed[0]!.toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capitalized) ? capitalized : `${capitalized}.`;
};

const waitSentence = (retryAfter: number | undefined): string =>
  retryAfter === undefined ? 'Try again in a moment.' : `Try again in ${retryAfter} s.`;

/**
 * The sentence a page shows for a failed request. The service's own message is written for its reader (which
 * field, which rule) and is kept for answers about the request (4xx); where it is not about anything the reader
 * did (the network, 5xx, answers that are no error body of the service, rate limits) a plain sentence replaces it
 * and the service's words go to the details.
 */
export function errorPresentation(error: unknown): ErrorPresentation {
  if (!isApiError(error)) {
    return { sentence: asSentence(error instanceof Error ? error.message : String(error)), details: [] };
  }
  const details: ErrorPresentation['details'] = [];
  if (error.status > 0) details.push({ label: 'Status', value: String(error.status) });
  details.push({ label: 'Code', value: error.code });
  if (error.requestId) details.push({ label: 'Request id', value: error.requestId });
  const replaced = (sentence: string): ErrorPresentation => ({
    sentence,
    details: [...details, { label: 'Message', value: error.message }],
  });
  if (error.status === 0) {
    return replaced('The service could not be reached. Check your connection and try again.');
  }
  if (error.status === 429) return replaced(`Too many requests right now. ${waitSentence(error.retryAfter)}`);
  if (error.status === 503)
    return replaced(`The service is unavailable right now. ${waitSentence(error.retryAfter)}`);
  if (error.status >= 500) {
    return replaced(
      'Something went wrong on the service. Try again; if it happens again, give the request id below to whoever runs it.',
    );
  }
  if (error.code === `HTTP_${error.status}`) {
    return replaced(`The service answered with an unexpected error (HTTP ${error.status}).`);
  }
  return { sentence: asSentence(error.message), details };
}
