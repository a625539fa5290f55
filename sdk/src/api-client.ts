import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/api.ts';

export type ApiClient = Client<paths>;

/**
 * The whole API, typed from the generated OpenAPI types: `client.GET('/org/features')`,
 * `client.POST('/org/subscribers', { body })`. A member key is a server-side secret (SPEC.md 5.7).
 */
export function createApiClient(options: { baseUrl: string; apiKey: string; fetch?: typeof fetch }): ApiClient {
  return createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { 'x-api-key': options.apiKey },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}
