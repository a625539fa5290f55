import { apiErrorOf, networkError } from './errors.ts';

/**
 * The one way the console calls the service: same-origin fetch with the session cookie (HttpOnly, never read
 * here), JSON both ways, and the session's CSRF token on every method that changes something. The browser
 * never holds an API key (SPEC 5.7).
 */

let csrfToken: string | null = null;
let onUnauthenticated: (() => void) | null = null;

export const setCsrfToken = (token: string | null): void => {
  csrfToken = token;
};

/** Called when a request that needed a session got 401: the session ended (expired, signed out, suspended). */
export const setUnauthenticatedHandler = (handler: (() => void) | null): void => {
  onUnauthenticated = handler;
};

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  body?: unknown;
  /** Sign-in and friends answer 401 for wrong credentials: that is not an ended session. */
  expectUnauthenticated?: boolean;
}

const SAFE_METHODS: ReadonlySet<Method> = new Set(['GET']);

function pathWithQuery(path: string, query: Query | undefined): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') params.set(name, String(value));
  }
  const search = params.toString();
  return search ? `${path}?${search}` : path;
}

/**
 * The Idempotency-Key of each write not yet answered with a success, by the write itself (method, path, body):
 * submitting the same form again after no answer or an error sends the same key, so a write that did commit is
 * answered from its first response instead of being made twice (an error is never stored: the request runs again).
 * A success ends it: the next identical submission is a new write (rotating a secret twice rotates it twice).
 */
const unsettledWrites = new Map<string, string>();

function newIdempotencyKey(): string {
  // getRandomValues, unlike randomUUID, exists outside secure contexts (a console served over plain http).
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * The same write already on its way (a double click on a submit button): its answer is this call's too, rather than
 * a second request under the same key, which the service refuses with 409 while the first runs.
 */
const writesInFlight = new Map<string, Promise<unknown>>();

export function request<T>(method: Method, path: string, options: RequestOptions = {}): Promise<T> {
  const url = pathWithQuery(path, options.query);
  const payload = options.body !== undefined ? JSON.stringify(options.body) : undefined;
  if (SAFE_METHODS.has(method)) return send<T>(method, url, payload, options, null);
  const write = `${method} ${url} ${payload ?? ''}`;
  const joined = writesInFlight.get(write);
  if (joined) return joined as Promise<T>;
  const sent = send<T>(method, url, payload, options, write).finally(() => writesInFlight.delete(write));
  writesInFlight.set(write, sent);
  return sent;
}

/** `write`: the write's identity (method, URL, body), null for a read. */
async function send<T>(
  method: Method,
  url: string,
  payload: string | undefined,
  options: RequestOptions,
  write: string | null,
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  if (write !== null) {
    if (csrfToken) headers['x-csrf-token'] = csrfToken;
    const key = unsettledWrites.get(write) ?? newIdempotencyKey();
    unsettledWrites.set(write, key);
    headers['idempotency-key'] = key;
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers,
      credentials: 'same-origin',
      ...(payload !== undefined ? { body: payload } : {}),
    });
  } catch (cause) {
    throw networkError(cause);
  }
  if (write !== null && response.ok) unsettledWrites.delete(write);
  const text = await response.text();
  let body: unknown = null;
  if (text) {
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const error = apiErrorOf(response, body);
    if (response.status === 401 && !options.expectUnauthenticated) onUnauthenticated?.();
    throw error;
  }
  return body as T;
}

export const api = {
  get: <T>(path: string, query?: Query) => request<T>('GET', path, query ? { query } : {}),
  post: <T>(path: string, body?: unknown) => request<T>('POST', path, body === undefined ? {} : { body }),
  put: <T>(path: string, body: unknown) => request<T>('PUT', path, { body }),
  patch: <T>(path: string, body: unknown) => request<T>('PATCH', path, { body }),
  delete: (path: string) => request<null>('DELETE', path),
};

/** A path segment chosen by the organization (subscriber ids may hold `@`, `+`, `:`). */
export const segment = (value: string): string => encodeURIComponent(value);
