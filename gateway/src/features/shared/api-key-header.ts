import type { FastifyRequest } from 'fastify';

/** The request's `X-API-Key` (the first, when a client repeats the header). */
export const xApiKeyOf = (request: FastifyRequest): string | undefined => {
  const header = request.headers['x-api-key'];
  return Array.isArray(header) ? header[0] : header;
};
