import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors/app-error.ts';

/**
 * Set by the gateway (and only by it: a client's own value is dropped) on a request it forwards without its body,
 * because the body was over the limit. Admin answers it 413 as if it had read the body itself, so the write is
 * recorded in the audit log like every other write under /org (SPEC.md: one entry per request), not refused by the
 * gateway unseen. A client that sends it to admin directly only refuses its own request.
 */
export const BODY_OVER_LIMIT_HEADER = 'x-gateway-body-over-limit';

export const payloadTooLarge = () => new AppError(413, 'PAYLOAD_TOO_LARGE', 'The request body is too large.');

/** Admin: registered after the audit log's hooks, so the request's pending entry exists when it is refused. */
export const bodyOverLimitRefusal = fp(
  async function bodyOverLimitRefusal(app: FastifyInstance) {
    app.addHook('preParsing', async (request, _reply, payload) => {
      if (request.headers[BODY_OVER_LIMIT_HEADER] !== undefined) throw payloadTooLarge();
      return payload;
    });
  },
  { name: 'body-over-limit-refusal' },
);
