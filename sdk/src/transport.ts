import { Agent, request, type Dispatcher } from 'undici';
import { EntitlementsError, errorFromResponse } from './errors.ts';

/** The eval usage headers (SPEC.md part 8); null when the organization has no monthly cap. */
export interface EvalUsage {
  limit: number;
  used: number;
  /** `80`, `100` or `grace`; null when not warning. */
  warn: string | null;
}

export interface RetryOptions {
  /** Attempts after the first; default 2. */
  retries?: number;
  /** First backoff ceiling in ms (doubling per attempt, full jitter); default 100. */
  baseDelayMs?: number;
  /** Backoff ceiling in ms; default 2000. */
  maxDelayMs?: number;
  /** A Retry-After longer than this ends the retries at once instead of waiting; default 5000. */
  maxRetryAfterMs?: number;
}

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  /** Per attempt, connection to full body; default 2000 ms. */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Default: an undici keep-alive Agent owned (and closed) by this client. */
  dispatcher?: Dispatcher;
}

export interface Reply {
  status: number;
  body: unknown;
  etag: string | null;
  usage: EvalUsage | null;
  /** `Idempotent-Replayed: true`: the first answer to an earlier request with the same Idempotency-Key. */
  replayed: boolean;
}

export interface SendOptions {
  body?: unknown;
  ifNoneMatch?: string | null;
  /** Sent as `Idempotency-Key` on every attempt of this call: a retry of a write the service applied is a replay. */
  idempotencyKey?: string;
  /** Whether a 2xx body is the route's answer; one that is not (a page, an empty body) is thrown. */
  answers?: (body: unknown) => boolean;
}

/** A JSON object holding `field` as an array (a list's items). */
export const holdsArray =
  (field: string) =>
  (body: unknown): boolean =>
    typeof body === 'object' && body !== null && Array.isArray((body as Record<string, unknown>)[field]);

/** A check result: an object naming its feature and kind. */
export const isCheckResult = (body: unknown): boolean =>
  typeof body === 'object' &&
  body !== null &&
  typeof (body as Record<string, unknown>).feature === 'string' &&
  typeof (body as Record<string, unknown>).kind === 'string';

// 408: the request did not reach the service in time, as transient as a timeout of the SDK's own.
const RETRIED_STATUSES = new Set([408, 429, 502, 503, 504]);

const header = (headers: Record<string, string | string[] | undefined>, name: string): string | null => {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? null;
};

function usageFrom(headers: Record<string, string | string[] | undefined>): EvalUsage | null {
  const limit = header(headers, 'x-svc-eval-limit');
  const used = header(headers, 'x-svc-eval-used');
  if (limit === null || used === null) return null;
  return { limit: Number(limit), used: Number(used), warn: header(headers, 'x-svc-eval-warn') };
}

function retryAfterSeconds(headers: Record<string, string | string[] | undefined>): number | null {
  return retryAfterSecondsOf(header(headers, 'retry-after'));
}

/** A `Retry-After` value (delay-seconds or an HTTP date) in seconds from now; null when absent or unreadable. */
export function retryAfterSecondsOf(value: string | null): number | null {
  if (value === null) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One HTTP client per SDK client: keep-alive connections, timeouts, retries with jittered backoff. */
export class Transport {
  readonly #baseUrl: string;
  readonly #apiKey: string;
  readonly #timeoutMs: number;
  readonly #retry: Required<RetryOptions>;
  readonly #dispatcher: Dispatcher;
  readonly #ownsDispatcher: boolean;
  #closed = false;

  constructor(options: TransportOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#timeoutMs = options.timeoutMs ?? 2000;
    this.#retry = {
      retries: options.retry?.retries ?? 2,
      baseDelayMs: options.retry?.baseDelayMs ?? 100,
      maxDelayMs: options.retry?.maxDelayMs ?? 2000,
      maxRetryAfterMs: options.retry?.maxRetryAfterMs ?? 5000,
    };
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000, connections: 64 });
  }

  /**
   * A 2xx or 304 reply; anything else after the retries is thrown as an EntitlementsError. Retried: no
   * response, a timeout, 408, 429 and 502/503/504, waiting Retry-After when the service sends one. The headers,
   * the idempotency key among them, are built once: every attempt sends the same request.
   */
  async send(method: 'GET' | 'POST', path: string, options: SendOptions = {}): Promise<Reply> {
    const headers: Record<string, string> = { 'x-api-key': this.#apiKey, accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.ifNoneMatch) headers['if-none-match'] = options.ifNoneMatch;
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);

    for (let attempt = 0; ; attempt++) {
      // Before every attempt: a retry after close() would meet a closed dispatcher and read as an outage.
      this.assertOpen(options.idempotencyKey);
      let failure: EntitlementsError;
      let waitMs: number | null = null;
      try {
        const res = await request(`${this.#baseUrl}${path}`, {
          method,
          headers,
          body,
          dispatcher: this.#dispatcher,
          signal: AbortSignal.timeout(this.#timeoutMs),
        });
        const text = await res.body.text();
        const parsed: unknown = text ? safeJson(text) : null;
        const usage = usageFrom(res.headers);
        if ((res.statusCode >= 200 && res.statusCode < 300) || res.statusCode === 304) {
          // Not the service's answer (a web page at a wrong baseUrl, a proxy's empty 200): a mistake to fix, not an
          // outage to wait out, and never read as if it were one.
          if (res.statusCode !== 304 && options.answers && !options.answers(parsed)) {
            throw new EntitlementsError({
              code: 'UNEXPECTED_RESPONSE',
              status: res.statusCode,
              message:
                `${method} ${path} answered ${res.statusCode} with a body that is not the service's ` +
                `(${header(res.headers, 'content-type') ?? 'no content type'}): is baseUrl the service's?`,
              idempotencyKey: options.idempotencyKey ?? null,
            });
          }
          return {
            status: res.statusCode,
            body: parsed,
            etag: header(res.headers, 'etag'),
            usage,
            replayed: header(res.headers, 'idempotent-replayed') === 'true',
          };
        }
        const retryAfter = retryAfterSeconds(res.headers);
        failure = errorFromResponse(res.statusCode, parsed, retryAfter, options.idempotencyKey ?? null);
        if (!RETRIED_STATUSES.has(res.statusCode)) throw failure;
        if (retryAfter !== null) waitMs = retryAfter * 1000;
      } catch (error) {
        if (error instanceof EntitlementsError) throw error;
        failure = transportError(error, this.#timeoutMs, options.idempotencyKey ?? null);
      }
      if (attempt >= this.#retry.retries) throw failure;
      if (waitMs !== null && waitMs > this.#retry.maxRetryAfterMs) throw failure;
      const ceiling = Math.min(this.#retry.maxDelayMs, this.#retry.baseDelayMs * 2 ** attempt);
      // Full jitter spreads the retries of many servers that failed at once; Retry-After is a floor.
      await sleep((waitMs ?? 0) + Math.random() * ceiling);
    }
  }

  /** A call after close() is a mistake of the caller's, not an outage: never answered with a fallback or stale. */
  assertOpen(idempotencyKey: string | null = null): void {
    if (!this.#closed) return;
    throw new EntitlementsError({
      code: 'CLIENT_CLOSED',
      message: 'This client was closed; make a new one.',
      idempotencyKey,
    });
  }

  /** Closes the connections it made (not a dispatcher it was given); closing again does nothing. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function transportError(error: unknown, timeoutMs: number, idempotencyKey: string | null): EntitlementsError {
  const name = (error as { name?: string } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new EntitlementsError({
      code: 'TIMEOUT',
      message: `No answer within ${timeoutMs} ms.`,
      idempotencyKey,
      cause: error,
    });
  }
  return new EntitlementsError({
    code: 'NETWORK_ERROR',
    message: `The service could not be reached: ${(error as Error | null)?.message ?? String(error)}`,
    idempotencyKey,
    cause: error,
  });
}
