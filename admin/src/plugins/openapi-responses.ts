/**
 * The last pass over the OpenAPI document: the answers every route can give that no route schema declares, because
 * hooks shared by all routes give them (the body parser, the failed-key budget), a description for
 * each response, and an operationId for each operation (a generated client names its methods by it).
 */
type Response = { description?: string; headers?: Record<string, unknown> } & Record<string, unknown>;
type Operation = {
  operationId?: string;
  parameters?: Array<{ name?: string; in?: string }>;
  requestBody?: { content?: Record<string, unknown> };
  responses?: Record<string, Response>;
} & Record<string, unknown>;
type OpenApiObject = { paths?: Record<string, Record<string, unknown>> } & Record<string, unknown>;

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** fastify-swagger's description of a response whose schema gives none. */
const GENERATED_DESCRIPTION = 'Default Response';

const STATUS_DESCRIPTIONS: Record<string, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'Done; no body',
  304: 'Not modified',
  400: 'Bad request',
  401: 'Missing, invalid or revoked API key (UNAUTHENTICATED)',
  403: 'The key or member lacks the scope or role this route needs (FORBIDDEN)',
  404: 'Not found (NOT_FOUND)',
  409: 'The request conflicts with the current state (CONFLICT)',
  413: 'The body is larger than this route takes (PAYLOAD_TOO_LARGE)',
  415: 'The body is not of a content type this route takes (UNSUPPORTED_MEDIA_TYPE)',
  422: 'The body, path or query is not valid (VALIDATION_ERROR)',
  429: 'Too many requests (RATE_LIMITED); wait Retry-After seconds',
  503: 'A dependency is unavailable right now (SERVICE_UNAVAILABLE); nothing was changed',
};

const RETRY_AFTER = {
  'Retry-After': { description: 'seconds to wait before trying again', schema: { type: 'integer' } },
};

const errorResponse = (errorBody: unknown, description: string): Response => ({
  description,
  content: { 'application/json': { schema: errorBody } },
});

/** `post /org/subscribers/{subscriber_id}/credits` -> `postOrgSubscribersCreditsBySubscriberId`. */
function operationIdOf(method: string, path: string): string {
  const words: string[] = [];
  const parameters: string[] = [];
  for (const segment of path.split('/').filter(Boolean)) {
    const parameter = /^\{(.+)\}$/.exec(segment);
    if (parameter) parameters.push(parameter[1]!);
    else words.push(segment);
  }
  const camel = (text: string) =>
    text
      .split(/[^A-Za-z0-9]+/)
      .filter(Boolean)
      .map((word) => word[0]!.toUpperCase() + word.slice(1))
      .join('');
  const by = parameters.length > 0 ? `By${parameters.map(camel).join('And')}` : '';
  return `${method}${words.map(camel).join('')}${by}`;
}

function completed(method: string, path: string, operation: Operation, errorBody: unknown): Operation {
  const responses: Record<string, Response> = { ...(operation.responses ?? {}) };
  const add = (status: string, response: Response) => {
    responses[status] ??= response;
  };
  const organizationRoute = path === '/org' || path.startsWith('/org/');
  if (operation.requestBody?.content?.['application/json']) {
    add('413', errorResponse(errorBody, STATUS_DESCRIPTIONS[413]!));
    add('415', errorResponse(errorBody, STATUS_DESCRIPTIONS[415]!));
  }
  // Every route spends the failed-key budget of the client's address (docs/decisions.md, "Unauthenticated load").
  if (organizationRoute)
    add('429', errorResponse(errorBody, 'Too many failed API keys from this address (RATE_LIMITED)'));
  for (const [status, response] of Object.entries(responses)) {
    let next = response;
    if (next.description === undefined || next.description === GENERATED_DESCRIPTION)
      next = { ...next, description: STATUS_DESCRIPTIONS[status] ?? `HTTP ${status}` };
    if (status === '429' && !next.headers?.['Retry-After'])
      next = { ...next, headers: { ...next.headers, ...RETRY_AFTER } };
    responses[status] = next;
  }
  return { ...operation, operationId: operation.operationId ?? operationIdOf(method, path), responses };
}

/** swagger's `transformObject`, last: `errorBody` is the schema (or its reference) of SPEC.md §7's error body. */
export function withCompleteResponses(
  document: Partial<OpenApiObject>,
  errorBody: unknown,
): Partial<OpenApiObject> {
  const paths = Object.fromEntries(
    Object.entries(document.paths ?? {}).map(([path, operations]) => [
      path,
      Object.fromEntries(
        Object.entries(operations).map(([method, operation]) => [
          method,
          METHODS.has(method) ? completed(method, path, operation as Operation, errorBody) : operation,
        ]),
      ),
    ]),
  );
  return { ...document, paths };
}
