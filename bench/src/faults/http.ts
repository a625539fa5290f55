/** One HTTP exchange as the fault matrix records it: a status, or why there was none. */
export interface Exchange {
  status: number | null;
  /** Set when no status came back: ECONNREFUSED (never reached the server), a socket error, or TIMEOUT. */
  failure: string | null;
  headers: Headers | null;
  body: unknown;
  startedAt: number;
  endedAt: number;
}

const REQUEST_TIMEOUT_MS = 5000;

interface Request {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  apiKey: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** The innermost error code undici reports (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET, ...). */
function failureCode(error: unknown): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return 'TIMEOUT';
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = current.cause;
  }
  return error instanceof Error ? error.message : String(error);
}

/** Never throws: every request ends in a status or a failure code, within REQUEST_TIMEOUT_MS. */
export async function exchange({ method, url, apiKey, body, headers }: Request): Promise<Exchange> {
  const startedAt = Date.now();
  try {
    const response = await fetch(url, {
      method,
      headers: {
        'x-api-key': apiKey,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: keep the text for the report
    }
    return { status: response.status, failure: null, headers: response.headers, body: parsed, startedAt, endedAt: Date.now() };
  } catch (error) {
    return { status: null, failure: failureCode(error), headers: null, body: null, startedAt, endedAt: Date.now() };
  }
}

/** Throws unless the answer has the expected status: for setup steps, which must not fail. */
export async function expectStatus(request: Request, expected: number): Promise<unknown> {
  const answer = await exchange(request);
  if (answer.status !== expected) {
    throw new Error(`${request.method} ${request.url} -> ${answer.status ?? answer.failure}: ${JSON.stringify(answer.body)}`);
  }
  return answer.body;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
