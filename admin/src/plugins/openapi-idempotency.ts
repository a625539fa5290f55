/**
 * Every write under /org that admin answers takes an `Idempotency-Key` (features/shared/write/idempotency.ts); the
 * header is added to those operations here, since no route schema declares request headers the service reads
 * before validation. The gateway's own routes (evals, usage) are added after this and keep their own documentation.
 */
type Operation = {
  parameters?: unknown[];
  responses?: Record<string, { headers?: Record<string, unknown> } & Record<string, unknown>>;
} & Record<string, unknown>;
type OpenApiObject = { paths?: Record<string, Record<string, Operation>> } & Record<string, unknown>;

const WRITE_METHODS = new Set(['post', 'put', 'patch', 'delete']);

const IDEMPOTENCY_KEY_PARAMETER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes the write safe to retry for 24 hours (keys are per organization): a repeat with the same method, path, ' +
    'body and member answers the first response again with `Idempotent-Replayed: true`; another request under ' +
    'the key gets 422 IDEMPOTENCY_KEY_REUSED, and a repeat while the first is still running gets 409. Only ' +
    'successful writes are kept: after an error the same key runs the request again.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
};

const REPLAYED_HEADER = {
  'Idempotent-Replayed': {
    description:
      '`true` when this is the stored response of an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
};

function withIdempotencyKey(operation: Operation): Operation {
  const responses = Object.fromEntries(
    Object.entries(operation.responses ?? {}).map(([status, response]) => [
      status,
      status.startsWith('2')
        ? { ...response, headers: { ...response.headers, ...REPLAYED_HEADER } }
        : response,
    ]),
  );
  // A repeat while the first request still runs (admin's keys; the gateway's usage keys never answer 409).
  responses['409'] ??= {
    description: 'The first request under this Idempotency-Key is still running (CONFLICT)',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } },
  };
  return {
    ...operation,
    parameters: [...(operation.parameters ?? []), IDEMPOTENCY_KEY_PARAMETER],
    responses,
  };
}

export function withIdempotencyKeys({
  openapiObject,
}: {
  openapiObject: Partial<OpenApiObject>;
}): Partial<OpenApiObject> {
  const paths = Object.fromEntries(
    Object.entries(openapiObject.paths ?? {}).map(([path, operations]) => [
      path,
      path === '/org' || path.startsWith('/org/')
        ? Object.fromEntries(
            Object.entries(operations).map(([method, operation]) => [
              method,
              WRITE_METHODS.has(method) ? withIdempotencyKey(operation) : operation,
            ]),
          )
        : operations,
    ]),
  );
  return { ...openapiObject, paths };
}
