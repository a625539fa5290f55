import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { generateApiKey } from '@ent/common/auth/api-key';
import { createKeyWithScopes } from '../../../test-support/api-keys.ts';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../../gateway/src/app.ts';
import {
  operationsOf,
  requestsFor,
  type FuzzRequest,
  type OpenApiDocument,
  type Operation,
} from './fuzz/requests.ts';
import { validValue } from './fuzz/schema-arbitrary.ts';
import { seedTenant, type TenantData } from './tenant-data.ts';

/** Fixed, so a failure replays exactly; change it to explore, never to make a run pass. */
const SEED = 20_261_212;
const REQUESTS_PER_OPERATION = 205;
const REQUEST_TIMEOUT_MS = 10_000;
const CONCURRENCY = 8;

let ctx: AdminTestContext;
let gateway: GatewayApp;
let org: TestOrganization;
let data: TenantData;
let document: OpenApiDocument;

beforeAll(async () => {
  ctx = await createAdminContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({
    config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` },
    logger: false,
  });
  await gateway.ready();
  org = await createTestOrganization(ctx.db, 'Fuzzed');
  data = await seedTenant(ctx.app, org.headers, 'fz');
  document = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

/** The eval routes are the gateway's; every other route of the document is admin's. */
const isEvalRoute = (operation: Operation): boolean => operation.path.includes('/entitlements');
/** Metered usage routes the gateway answers itself (DESIGN.md §5): reports, batches and the current periods. */
const isMeteredUsageRoute = (operation: Operation): boolean =>
  operation.path === '/org/usage-events' || operation.path === '/org/subscribers/{subscriber_id}/usage';
const isGatewayRoute = (operation: Operation): boolean => isEvalRoute(operation) || isMeteredUsageRoute(operation);

type Outcome = { request: FuzzRequest; status: number | 'hang'; body: string; route: string; ms: number };

async function send(operation: Operation, request: FuzzRequest): Promise<Outcome> {
  const app = isGatewayRoute(operation) ? gateway : ctx.app;
  const route = `${operation.method} ${operation.path}`;
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<'hang'>((resolve) => {
    timer = setTimeout(() => resolve('hang'), REQUEST_TIMEOUT_MS);
  });
  const response = app.inject({
    method: request.method,
    url: request.url,
    headers: request.headers,
    payload: request.payload,
  });
  const result = await Promise.race([response, hang]);
  clearTimeout(timer);
  const ms = performance.now() - started;
  if (result === 'hang') return { request, status: 'hang', body: '', route, ms };
  return { request, status: result.statusCode, body: result.body, route, ms };
}

/** Whether a 4xx body is SPEC.md's error body: type, code, message, request_id strings and details an object. */
function hasErrorBody(body: string): boolean {
  try {
    const parsed = JSON.parse(body) as { error?: Record<string, unknown> };
    const error = parsed.error;
    if (!error) return false;
    const strings = ['type', 'code', 'message', 'request_id'].every(
      (name) => typeof error[name] === 'string',
    );
    const details = error.details;
    return strings && typeof details === 'object' && details !== null && !Array.isArray(details);
  } catch {
    return false;
  }
}

describe('OpenAPI-driven HTTP fuzzing', () => {
  it('answers every malformed or boundary request to every route without a 5xx or a hang, with the error body on 4xx', async () => {
    const operations = operationsOf(document);
    expect(operations.length).toBeGreaterThanOrEqual(45);
    const restricted = await createKeyWithScopes(
      ctx.db,
      org.organization_id,
      ['check', 'catalog:read'],
      'viewer',
    );
    const credentials = {
      valid: org.api_key,
      restricted: restricted.apiKey,
      unknownWellFormed: generateApiKey().plaintext,
    };
    // The caller's own ids are left out of the known values, so a fuzzed DELETE never revokes the key in use.
    const known: Record<string, readonly string[]> = { ...data };

    const work: Array<[Operation, FuzzRequest]> = [];
    operations.forEach((operation, index) => {
      const requests = fc.sample(requestsFor(operation, credentials, known), {
        seed: SEED + index,
        numRuns: REQUESTS_PER_OPERATION,
      });
      for (const request of requests) work.push([operation, request]);
    });

    const started = Date.now();
    const outcomes: Outcome[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < work.length) {
          const [operation, request] = work[next++]!;
          outcomes.push(await send(operation, request));
        }
      }),
    );
    const durationMs = Date.now() - started;

    const byStatus: Record<string, number> = {};
    for (const outcome of outcomes)
      byStatus[String(outcome.status)] = (byStatus[String(outcome.status)] ?? 0) + 1;
    const routesHit = new Set(work.map(([operation]) => `${operation.method} ${operation.path}`)).size;
    const msByRoute: Record<string, number> = {};
    for (const o of outcomes) msByRoute[o.route] = (msByRoute[o.route] ?? 0) + o.ms;
    const slowest = Object.entries(msByRoute)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([route, ms]) => `${route} ${Math.round(ms)} ms`);
    console.log(
      JSON.stringify({
        seed: SEED,
        requests: outcomes.length,
        routes: routesHit,
        durationMs,
        byStatus,
        slowest,
      }),
    );

    const describe = (o: Outcome) =>
      `${o.status} ${o.request.method} ${o.request.url.slice(0, 200)} ${String(o.request.payload ?? '').slice(0, 200)} -> ${o.body.slice(0, 300)}`;
    const failures = outcomes.filter((o) => o.status === 'hang' || o.status >= 500);
    const shapeless = outcomes.filter(
      (o) => typeof o.status === 'number' && o.status >= 400 && o.status < 500 && !hasErrorBody(o.body),
    );
    expect(outcomes.length).toBeGreaterThanOrEqual(10_000);
    expect(routesHit).toBe(operations.length);
    expect(failures.map(describe).slice(0, 10)).toEqual([]);
    expect(shapeless.map(describe).slice(0, 10)).toEqual([]);
    // Most requests reach past authentication: the run exercises handlers, not only the 401 path.
    expect(outcomes.filter((o) => o.status !== 401).length).toBeGreaterThan(outcomes.length * 0.8);
  }, 180_000);
});

/**
 * Query parameter names a route does not declare, those that name Object.prototype's properties or look like nesting
 * among them: each is a 422 naming it, like any other unknown parameter, never silently dropped or read.
 */
const UNKNOWN_QUERY_NAMES = [
  'unknown',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__proto__[polluted]',
  'constructor[prototype][polluted]',
  'params[__proto__]',
  'params[constructor]',
  'params[toString]',
  'params[other]',
  'a[b][c]',
];

/** OFREP's routes answer a malformed request with the protocol's own 400 PARSE_ERROR body (decisions.md). */
const isOfrepRoute = (operation: Operation): boolean => operation.path.startsWith('/ofrep/');

interface Answer {
  status: number;
  body: {
    error?: { code?: string; details?: { field?: string; location?: string } };
    errorCode?: string;
    errorDetails?: string;
  };
}

/** Whether `answer` refuses the unknown query parameter `name`, in the error body the route's family uses. */
function refusesParameter(operation: Operation, answer: Answer, name: string): boolean {
  if (isOfrepRoute(operation)) {
    return (
      answer.status === 400 &&
      answer.body.errorCode === 'PARSE_ERROR' &&
      answer.body.errorDetails?.includes(name) === true
    );
  }
  const error = answer.body.error;
  return (
    answer.status === 422 &&
    error?.code === 'VALIDATION_ERROR' &&
    error.details?.field === name &&
    error.details.location === 'querystring'
  );
}

describe('unknown query parameters', () => {
  it('are refused naming the parameter, whatever its name, on every route, through the gateway and at admin', async () => {
    const operations = operationsOf(document);
    const known: Record<string, readonly string[]> = { ...data };
    const allKnown = Object.values(known).flat();
    const refusedElsewhere: string[] = [];
    const wrongAnswers: string[] = [];
    for (const [index, operation] of operations.entries()) {
      let path = operation.path;
      for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
        const value = known[parameter.name]?.[0] ?? 'x';
        path = path.replace(`{${parameter.name}}`, encodeURIComponent(value));
      }
      // A body is validated before the query string: one the schema accepts lets the query's refusal show.
      const bodies: Array<string | undefined> = operation.body
        ? fc
            .sample(validValue(operation.body, allKnown), { seed: SEED + index, numRuns: 30 })
            .map((b) => JSON.stringify(b))
        : [undefined];
      const gatewayOnly = isGatewayRoute(operation) || isOfrepRoute(operation);
      const apps = gatewayOnly
        ? [['gateway', gateway] as const]
        : ([
            ['gateway', gateway],
            ['admin', ctx.app],
          ] as const);
      for (const [where, app] of apps) {
        for (const name of UNKNOWN_QUERY_NAMES) {
          const route = `${where} ${operation.method} ${path}?${name}=x`;
          let answer: Answer | undefined;
          for (const payload of bodies) {
            const res = await app.inject({
              method: operation.method,
              url: `${path}?${name}=x`,
              headers: {
                ...org.headers,
                ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
              },
              payload,
            });
            answer = { status: res.statusCode, body: JSON.parse(res.body || '{}') as Answer['body'] };
            if (answer.body.error?.details?.location !== 'body') break;
          }
          if (answer?.body.error?.details?.location === 'body') refusedElsewhere.push(route);
          else if (!answer || !refusesParameter(operation, answer, name)) {
            wrongAnswers.push(`${route} -> ${answer?.status} ${JSON.stringify(answer?.body)}`);
          }
        }
      }
    }
    expect(wrongAnswers.slice(0, 20)).toEqual([]);
    // Each route was reached with a body it accepts, so every case above tested the query string.
    expect(refusedElsewhere.slice(0, 20)).toEqual([]);
  }, 180_000);
});
