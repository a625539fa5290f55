/**
 * `POST /org/imports` reads its body as a stream (features/imports/receive.ts), so no route schema declares it: the
 * NDJSON request body is added to the document here.
 */
type OpenApiObject = { paths?: Record<string, Record<string, Record<string, unknown>>> } & Record<
  string,
  unknown
>;

const IMPORT_BODY = {
  required: true,
  description:
    'NDJSON, one record a line: `{"type": "feature" | "plan" | "subscriber" | "subscription" | "override" | ' +
    '"credit", ...the fields of its single-write route}` (subscriptions and overrides also carry `subscriber_id`, ' +
    'overrides `feature_key`); at most 1 GiB.',
  content: { 'application/x-ndjson': { schema: { type: 'string' } } },
};

export function withImportBody(document: OpenApiObject): OpenApiObject {
  const operation = document.paths?.['/org/imports']?.post;
  if (operation) operation.requestBody = IMPORT_BODY;
  return document;
}
