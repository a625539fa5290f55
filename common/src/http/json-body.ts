import type { FastifyInstance } from 'fastify';
import { validationError } from '../errors/app-error.ts';
import { MAX_JSON_DEPTH, exceedsJsonDepth } from './json-depth.ts';

/**
 * Replaces Fastify's JSON body parser with the same parser behind a depth check, and reads an empty body as none.
 * A small body nested thousands deep (40 KB of `[`) passes the size limit and would overflow the stack of a
 * recursive walk later (a 500). 422 rather than 413: the body is small, its shape is what is wrong
 * (decisions.md, "Hostile input").
 */
export function addJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? 'error',
    app.initialConfig.onConstructorPoisoning ?? 'error',
  );
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    // No body at all, even under a JSON content type (clients that send the header on every request, `fetch`'s
    // `Content-Length: 0`): a route that takes none answers as without it, one that needs one refuses it on `body`.
    if (text.length === 0) {
      done(null, undefined);
      return;
    }
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
    parse(request, text, (error, parsed) => {
      // Valid JSON refused on purpose (a `__proto__` key or `constructor.prototype`: prototype poisoning) is said
      // to be that, not malformed. Only a refused body pays for the second parse.
      if (error && isPlainJson(text)) {
        done(
          validationError('The request body may not hold a "__proto__" key or a "constructor.prototype".', {
            field: 'body',
          }),
          undefined,
        );
        return;
      }
      done(error, parsed);
    });
  });
}

function isPlainJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
