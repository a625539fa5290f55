import type { FastifyInstance } from 'fastify';
import { validationError } from '../errors/app-error.ts';
import { MAX_JSON_DEPTH, exceedsJsonDepth } from './json-depth.ts';

/**
 * Replaces Fastify's JSON body parser with the same parser behind a depth check: a small body nested thousands
 * deep (40 KB of `[`) used to pass the size limit and overflow the stack of a recursive walk later (a 500).
 * 422 rather than 413: the body is small, its shape is what is wrong (decisions.md, "Hostile input").
 */
export function addJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? 'error',
    app.initialConfig.onConstructorPoisoning ?? 'error',
  );
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (exceedsJsonDepth(text)) {
      done(
        validationError(`The request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels.`, {
          field: 'body',
          max_depth: MAX_JSON_DEPTH,
        }),
        undefined,
      );
      return;
    }
    parse(request, text, done);
  });
}
