import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config.ts';
import { notFound, validationError } from '../errors/app-error.ts';
import { sendError } from './error-handler.ts';

/** Path values (subscriber ids are up to 255 characters) fit, with room for percent-encoding. */
const MAX_PARAM_LENGTH = 1024;

/**
 * Options both services build Fastify with, so a request the router itself refuses (a malformed percent
 * sequence, an over-long path value) still gets SPEC.md's error body instead of Fastify's own.
 */
export function sharedServerOptions(config: Config): FastifyServerOptions {
  return {
    bodyLimit: config.bodyLimitBytes,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    ajv: { customOptions: { removeAdditional: false } },
    frameworkErrors: (error, request, reply) => {
      const appError =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? notFound('No resource has an identifier that long.')
          : validationError('The request path is not valid (check its percent-encoding).', { field: 'path' });
      return sendError(request, reply, appError);
    },
  };
}
