import { describe, expect, it } from 'vitest';
import { ApiError, apiErrorOf, errorPresentation, networkError } from '../src/api/errors.ts';

/** An answer of the service with its error body (SPEC part 7), as `fetch` gives it. */
const answer = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  apiErrorOf(new Response(JSON.stringify(body), { status, headers }), body);

const detailsOf = (error: unknown) =>
  Object.fromEntries(errorPresentation(error).details.map(({ label, value }) => [label, value]));

describe('errorPresentation', () => {
  it("shows the service's sentence alone, with status, code and request id as details", () => {
    const error = answer(401, {
      error: {
        type: 'authentication_error',
        code: 'UNAUTHENTICATED',
        message: 'The organization, email or password is wrong.',
        request_id: 'req_01jd0000000000000000000000',
      },
    });
    const { sentence } = errorPresentation(error);
    expect(sentence).toBe('The organization, email or password is wrong.');
    expect(sentence).not.toMatch(/401|UNAUTHENTICATED|req_/);
    expect(detailsOf(error)).toEqual({
      Status: '401',
      Code: 'UNAUTHENTICATED',
      'Request id': 'req_01jd0000000000000000000000',
    });
  });

  it('makes a sentence of a message without a capital or a full stop', () => {
    const error = new ApiError({ status: 409, code: 'CONFLICT', message: 'a plan with key pro exists' });
    expect(errorPresentation(error).sentence).toBe('A plan with key pro exists.');
  });

  it('replaces what is not about the request: the network, 5xx, rate limits, answers that are no error body', () => {
    const offline = networkError(new TypeError('Failed to fetch'));
    expect(errorPresentation(offline).sentence).toBe(
      'The service could not be reached. Check your connection and try again.',
    );
    expect(detailsOf(offline)).toMatchObject({ Code: 'NETWORK_ERROR' });
    expect(detailsOf(offline).Message).toContain('Failed to fetch');

    const limited = answer(
      429,
      { error: { code: 'RATE_LIMITED', message: 'Too many requests on the eval routes; retry later.' } },
      { 'retry-after': '12' },
    );
    expect(errorPresentation(limited).sentence).toBe('Too many requests right now. Try again in 12 s.');

    const unavailable = answer(503, {
      error: {
        code: 'SERVICE_UNAVAILABLE',
        message: 'Credentials cannot be checked right now; retry with backoff.',
      },
    });
    expect(errorPresentation(unavailable).sentence).toBe(
      'The service is unavailable right now. Try again in a moment.',
    );
    expect(detailsOf(unavailable).Message).toBe(
      'Credentials cannot be checked right now; retry with backoff.',
    );

    const crashed = answer(500, {
      error: { code: 'INTERNAL', message: 'Internal error.', request_id: 'req_01jd0000000000000000000001' },
    });
    expect(errorPresentation(crashed).sentence).toMatch(
      /^Something went wrong on the service\. .*request id/,
    );
    expect(detailsOf(crashed)['Request id']).toBe('req_01jd0000000000000000000001');

    const proxy = apiErrorOf(new Response('<html>bad gateway</html>', { status: 404 }), null);
    expect(errorPresentation(proxy).sentence).toBe(
      'The service answered with an unexpected error (HTTP 404).',
    );
  });

  it('shows any other error by its message', () => {
    expect(errorPresentation(new Error('boom'))).toEqual({ sentence: 'Boom.', details: [] });
  });
});
