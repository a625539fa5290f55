import fc from 'fast-check';
import { fuzzedValue, validValue, type JsonSchema } from './schema-arbitrary.ts';
import { hostilePathSegments, hostileQueryValues, rawJsonBodies } from './hostile-values.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  required?: boolean;
  schema: JsonSchema;
}

interface OpenApiOperation {
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema: JsonSchema }> };
}

export interface OpenApiDocument {
  paths: Record<string, Partial<Record<Lowercase<Method>, OpenApiOperation>>>;
}

export interface Operation {
  method: Method;
  path: string;
  parameters: Parameter[];
  body: JsonSchema | undefined;
}

export interface FuzzRequest {
  method: Method;
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

/** The metered usage routes the gateway answers itself (DESIGN.md §5): reports, batches and the current periods. */
const GATEWAY_USAGE_PATHS = new Set(['/org/subscribers/{subscriber_id}/usage', '/org/usage-events']);

/** The eval and metered usage routes are the gateway's; every other route of the document is admin's. */
export const isGatewayRoute = (operation: Operation): boolean =>
  operation.path.includes('/entitlements') || GATEWAY_USAGE_PATHS.has(operation.path);

/** Credentials a request carries: mostly the valid full-access key, so bodies reach the handlers. */
export interface Credentials {
  valid: string;
  restricted: string;
  unknownWellFormed: string;
}

const METHODS: Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export function operationsOf(document: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of METHODS) {
      const operation = item[method.toLowerCase() as Lowercase<Method>];
      if (!operation) continue;
      operations.push({
        method,
        path,
        parameters: operation.parameters ?? [],
        body: operation.requestBody?.content?.['application/json']?.schema,
      });
    }
  }
  return operations;
}

const keyHeaders = (credentials: Credentials): fc.Arbitrary<Record<string, string>> =>
  fc.oneof(
    { weight: 85, arbitrary: fc.constant({ 'x-api-key': credentials.valid }) },
    { weight: 5, arbitrary: fc.constant({ 'x-api-key': credentials.restricted }) },
    { weight: 4, arbitrary: fc.constant({}) },
    { weight: 3, arbitrary: fc.constant({ 'x-api-key': credentials.unknownWellFormed }) },
    { weight: 3, arbitrary: fc.constantFrom({ 'x-api-key': '' }, { 'x-api-key': 'svc-mk-1-' }, { 'x-api-key': 'x'.repeat(4000) }, { 'x-api-key': '\u00e9\u00ff' }) },
  );

function pathValue(parameter: Parameter, known: Record<string, readonly string[]>): fc.Arbitrary<string> {
  const ids = known[parameter.name] ?? [];
  const fromSchema = validValue(parameter.schema, ids).map((v) => encodeURIComponent(String(v)));
  return fc.oneof({ weight: 3, arbitrary: fromSchema }, { weight: 2, arbitrary: hostilePathSegments });
}

function queryString(parameters: Parameter[], known: Record<string, readonly string[]>): fc.Arbitrary<string> {
  const queryParameters = parameters.filter((p) => p.in === 'query');
  const pairs = queryParameters.map((p) =>
    fc.oneof(
      { weight: 3, arbitrary: fc.constant<string | null>(null) },
      { weight: 3, arbitrary: validValue(p.schema, known[p.name] ?? []).map((v) => `${p.name}=${encodeURIComponent(String(v))}`) },
      { weight: 2, arbitrary: hostileQueryValues.map((v) => `${p.name}=${v}`) },
      { weight: 1, arbitrary: fc.constant(`${p.name}=1&${p.name}=2`) },
    ),
  );
  const extra = fc.oneof(
    { weight: 8, arbitrary: fc.constant<string | null>(null) },
    { weight: 1, arbitrary: fc.constantFrom('unknown=1', 'params[key]=x', 'a[b][c]=1', '__proto__=1', '%ED%A0%80=1', '=', '&&') },
  );
  return fc.tuple(fc.tuple(...pairs), extra).map(([chosen, more]) => {
    const parts = [...chosen, more].filter((p): p is string => p !== null);
    return parts.length > 0 ? `?${parts.join('&')}` : '';
  });
}

type Body = { contentType?: string; payload?: string };

function bodyFor(schema: JsonSchema | undefined, known: readonly string[]): fc.Arbitrary<Body> {
  const raw = rawJsonBodies.map((payload): Body => ({ contentType: 'application/json', payload }));
  const odd = fc.constantFrom<Body>(
    {},
    { contentType: 'text/plain', payload: 'hello' },
    { contentType: 'application/json; charset=latin1', payload: '{}' },
    { contentType: 'application/x-www-form-urlencoded', payload: 'a=1' },
  );
  if (!schema) {
    return fc.oneof({ weight: 8, arbitrary: fc.constant<Body>({}) }, { weight: 1, arbitrary: raw }, { weight: 1, arbitrary: odd });
  }
  const json = fuzzedValue(schema, known).map((value): Body => ({ contentType: 'application/json', payload: JSON.stringify(value) }));
  return fc.oneof({ weight: 16, arbitrary: json }, { weight: 3, arbitrary: raw }, { weight: 1, arbitrary: odd });
}

/** Requests for one operation: path values, query, body and key drawn from the operation's schemas. */
export function requestsFor(
  operation: Operation,
  credentials: Credentials,
  known: Record<string, readonly string[]>,
): fc.Arbitrary<FuzzRequest> {
  const pathParameters = operation.parameters.filter((p) => p.in === 'path');
  const allKnown = Object.values(known).flat();
  return fc
    .record({
      path: fc.tuple(...pathParameters.map((p) => pathValue(p, known))),
      query: queryString(operation.parameters, known),
      body: bodyFor(operation.body, allKnown),
      headers: keyHeaders(credentials),
    })
    .map(({ path, query, body, headers }) => {
      let url = operation.path;
      pathParameters.forEach((p, i) => {
        url = url.replace(`{${p.name}}`, path[i]!);
      });
      const all = body.contentType ? { ...headers, 'content-type': body.contentType } : headers;
      return { method: operation.method, url: `${url}${query}`, headers: all, payload: body.payload };
    });
}
