import { randomUUID } from 'node:crypto';
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/api.ts';
import { retryAfterSecondsOf, type RetryOptions } from './transport.ts';

export type ApiClient = Client<paths>;

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
// As the eval transport: the request may not have reached the service, or it asked to come back.
const RETRIED_STATUSES = new Set([408, 429, 502, 503, 504]);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** 409 for the key itself: the first attempt is still running in admin, and its answer will be replayed. */
async function keyInFlight(response: Response): Promise<boolean> {
  if (response.status !== 409) return false;
  try {
    const body = (await response.clone().json()) as { error?: { details?: { field?: unknown } } };
    return body.error?.details?.field === 'Idempotency-Key';
  } catch {
    return false;
  }
}

/**
 * Each attempt ends after `timeoutMs` without the response's headers (a service that stopped answering): a
 * `TimeoutError`, which a write retries under its key. The body is not timed: an export streams as long as it takes.
 */
function timedAttempts(fetchImpl: typeof fetch, timeoutMs: number): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const timeout = new AbortController();
    const timer = setTimeout(
      () => timeout.abort(new DOMException(`No answer within ${timeoutMs} ms.`, 'TimeoutError')),
      timeoutMs,
    );
    try {
      return await fetchImpl(
        new Request(request, { signal: AbortSignal.any([request.signal, timeout.signal]) }),
      );
    } finally {
      clearTimeout(timer);
    }
  };
}

/**
 * Every write gets an `Idempotency-Key` (a random UUID unless the caller set one) and is retried with that same key
 * after no answer, 408, 429, 502/503/504 or a 409 for the key in flight: a write the service applied before the
 * connection dropped is answered again, not made twice (DESIGN.md §5). Reads are sent once, as before.
 */
function idempotentWrites(fetchImpl: typeof fetch, retry: RetryOptions = {}): typeof fetch {
  const retries = retry.retries ?? 2;
  const baseDelayMs = retry.baseDelayMs ?? 100;
  const maxDelayMs = retry.maxDelayMs ?? 2000;
  const maxRetryAfterMs = retry.maxRetryAfterMs ?? 5000;
  return async (input, init) => {
    const request = new Request(input, init);
    if (!WRITE_METHODS.has(request.method)) return fetchImpl(request);
    if (!request.headers.has('idempotency-key')) request.headers.set('idempotency-key', randomUUID());
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      let waitMs = 0;
      try {
        // A clone per attempt: the body of a sent request cannot be read again.
        const response = await fetchImpl(request.clone());
        if (last || !(RETRIED_STATUSES.has(response.status) || (await keyInFlight(response))))
          return response;
        // As the eval client: Retry-After is a floor under the backoff, and one above maxRetryAfterMs ends the retries.
        const retryAfter = retryAfterSecondsOf(response.headers.get('retry-after'));
        if (retryAfter !== null && retryAfter * 1000 > maxRetryAfterMs) return response;
        waitMs = (retryAfter ?? 0) * 1000;
        await response.body?.cancel();
      } catch (error) {
        if (last || request.signal.aborted) throw error;
      }
      await sleep(waitMs + Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt));
    }
  };
}

/**
 * The whole API, typed from the generated OpenAPI types: `client.GET('/org/features')`,
 * `client.POST('/org/subscribers', { body })`. A member key is a server-side secret (SPEC.md 5.7). Writes carry an
 * Idempotency-Key and are retried under it (`idempotentWrites`); pass your own `Idempotency-Key` header to make a
 * write safe to repeat across processes too.
 */
export function createApiClient(options: {
  baseUrl: string;
  apiKey: string;
  fetch?: typeof fetch;
  retry?: RetryOptions;
  /** Per attempt, until the response's headers; default 30000 (the service's own request deadline is 30 s). */
  timeoutMs?: number;
}): ApiClient {
  const attempt = timedAttempts(options.fetch ?? ((request) => fetch(request)), options.timeoutMs ?? 30_000);
  return createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { 'x-api-key': options.apiKey },
    fetch: idempotentWrites(attempt, options.retry),
  });
}
