import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as apiKeys from '@ent/contract/api-keys';
import * as audit from '@ent/contract/audit';
import * as consoleRoutes from '@ent/contract/console';
import * as credits from '@ent/contract/credits';
import * as evals from '@ent/contract/evals';
import * as features from '@ent/contract/features';
import * as invites from '@ent/contract/invites';
import * as members from '@ent/contract/members';
import * as meteredUsage from '@ent/contract/metered-usage';
import * as organization from '@ent/contract/organization';
import * as overrides from '@ent/contract/overrides';
import * as plans from '@ent/contract/plans';
import * as serviceAccounts from '@ent/contract/service-accounts';
import * as subscribers from '@ent/contract/subscribers';
import * as subscriptions from '@ent/contract/subscriptions';
import * as usage from '@ent/contract/usage';
import * as webhook from '@ent/contract/webhook';
import { createAdminContext, type AdminTestContext } from '../../test-support/admin-context.ts';

/**
 * The console's types are the contract's (console/src/api/types.ts); this checks that every route the console
 * calls (console/src/api/*.ts) still serves, in /openapi.json, the contract's schema for what the console reads
 * and sends. A route that answers or accepts another shape than the contract's fails here, before a browser
 * does. `null`: no body.
 */
interface ConsoleCall {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string;
  /** The 2xx answers the console reads, by status. */
  answers: Record<number, object | null>;
  body?: object;
}

const subscriber = '/org/subscribers/{subscriber_id}';
const account = '/org/service-accounts/{service_account_id}';

const CONSOLE_CALLS: ConsoleCall[] = [
  // catalog.ts
  { method: 'get', path: '/org/features', answers: { 200: features.FeatureListSchema } },
  {
    method: 'post',
    path: '/org/features',
    answers: { 201: features.FeatureSchema },
    body: features.CreateFeatureBody,
  },
  {
    method: 'patch',
    path: '/org/features/{key}',
    answers: { 200: features.FeatureSchema },
    body: features.UpdateFeatureBody,
  },
  { method: 'get', path: '/org/plans', answers: { 200: plans.PlanListSchema } },
  { method: 'get', path: '/org/plans/{key}', answers: { 200: plans.PlanSchema } },
  { method: 'post', path: '/org/plans', answers: { 201: plans.PlanSchema }, body: plans.CreatePlanBody },
  {
    method: 'patch',
    path: '/org/plans/{key}',
    answers: { 200: plans.PlanSchema },
    body: plans.UpdatePlanBody,
  },
  { method: 'post', path: '/org/plans/{key}/archive', answers: { 200: plans.PlanSchema } },
  { method: 'post', path: '/org/plans/{key}/unarchive', answers: { 200: plans.PlanSchema } },
  { method: 'delete', path: '/org/plans/{key}', answers: { 204: null } },
  // subscribers.ts
  { method: 'get', path: '/org/subscribers', answers: { 200: subscribers.SubscriberListSchema } },
  { method: 'get', path: subscriber, answers: { 200: subscribers.SubscriberSchema } },
  {
    method: 'post',
    path: '/org/subscribers',
    answers: { 201: subscribers.SubscriberSchema },
    body: subscribers.CreateSubscriberBody,
  },
  {
    method: 'patch',
    path: subscriber,
    answers: { 200: subscribers.SubscriberSchema },
    body: subscribers.UpdateSubscriberBody,
  },
  {
    method: 'get',
    path: `${subscriber}/subscriptions`,
    answers: { 200: subscriptions.SubscriptionListSchema },
  },
  {
    method: 'post',
    path: `${subscriber}/subscriptions`,
    answers: { 201: subscriptions.SubscriptionSchema },
    body: subscriptions.CreateSubscriptionBody,
  },
  {
    method: 'post',
    path: `${subscriber}/subscriptions/change`,
    answers: { 201: subscriptions.ChangedSubscriptionSchema },
    body: subscriptions.ChangeSubscriptionBody,
  },
  {
    method: 'post',
    path: `${subscriber}/subscriptions/{subscription_id}/cancel`,
    answers: { 200: subscriptions.SubscriptionSchema },
  },
  { method: 'get', path: `${subscriber}/overrides`, answers: { 200: overrides.OverrideListSchema } },
  {
    method: 'put',
    path: `${subscriber}/overrides/{feature_key}`,
    answers: { 200: overrides.OverrideSchema },
    body: overrides.PutOverrideBody,
  },
  { method: 'delete', path: `${subscriber}/overrides/{feature_key}`, answers: { 204: null } },
  { method: 'get', path: `${subscriber}/entitlements`, answers: { 200: evals.EntitlementListSchema } },
  { method: 'get', path: `${subscriber}/usage`, answers: { 200: meteredUsage.SubscriberUsageSchema } },
  {
    method: 'get',
    path: `${subscriber}/usage/{feature}/periods`,
    answers: { 200: meteredUsage.UsagePeriodListSchema },
  },
  {
    method: 'put',
    path: `${subscriber}/usage/{feature}`,
    answers: { 200: evals.MeteredCheckResultSchema },
    body: meteredUsage.CorrectUsageBody,
  },
  { method: 'get', path: `${subscriber}/credits`, answers: { 200: credits.CreditListSchema } },
  {
    method: 'post',
    path: `${subscriber}/credits`,
    answers: { 201: credits.CreditSchema },
    body: credits.CreateCreditBody,
  },
  { method: 'delete', path: `${subscriber}/credits/{credit_id}`, answers: { 200: credits.CreditSchema } },
  // usage.ts, audit.ts, organization.ts
  { method: 'get', path: '/org/usage/current', answers: { 200: usage.UsageRecordSchema } },
  { method: 'get', path: '/org/usage/history', answers: { 200: usage.UsageHistorySchema } },
  { method: 'get', path: '/org/audit-events', answers: { 200: audit.AuditEventListSchema } },
  { method: 'get', path: '/org', answers: { 200: organization.OrganizationSchema } },
  {
    method: 'patch',
    path: '/org',
    answers: { 200: organization.OrganizationSchema },
    body: organization.UpdateOrganizationBody,
  },
  // access.ts
  { method: 'get', path: '/org/members', answers: { 200: members.MemberListSchema } },
  {
    method: 'patch',
    path: '/org/members/{member_id}',
    answers: { 200: members.MemberSchema },
    body: members.UpdateMemberBody,
  },
  { method: 'get', path: '/org/members/{member_id}/minted-keys', answers: { 200: apiKeys.ApiKeyListSchema } },
  { method: 'get', path: '/org/invites', answers: { 200: invites.InviteListSchema } },
  {
    method: 'post',
    path: '/org/invites',
    answers: { 201: invites.InviteSchema },
    body: invites.CreateInviteBody,
  },
  { method: 'delete', path: '/org/invites/{invite_id}', answers: { 204: null } },
  {
    method: 'get',
    path: '/org/service-accounts',
    answers: { 200: serviceAccounts.ServiceAccountListSchema },
  },
  {
    method: 'post',
    path: '/org/service-accounts',
    answers: { 201: serviceAccounts.ServiceAccountSchema },
    body: serviceAccounts.CreateServiceAccountBody,
  },
  { method: 'get', path: `${account}/api-keys`, answers: { 200: apiKeys.ApiKeyListSchema } },
  {
    method: 'post',
    path: `${account}/api-keys`,
    answers: { 201: apiKeys.CreatedApiKeySchema },
    body: apiKeys.CreateApiKeyBody,
  },
  { method: 'delete', path: `${account}/api-keys/{key_id}`, answers: { 204: null } },
  // webhook.ts
  { method: 'get', path: '/console/api/webhook', answers: { 200: webhook.ConsoleWebhookSchema } },
  {
    method: 'put',
    path: '/org/webhook',
    answers: { 200: webhook.WebhookSchema, 201: webhook.WebhookWithSecretSchema },
    body: webhook.PutWebhookBody,
  },
  { method: 'post', path: '/org/webhook/rotate', answers: { 200: webhook.WebhookWithSecretSchema } },
  { method: 'post', path: '/org/webhook/enable', answers: { 200: webhook.WebhookSchema } },
  { method: 'post', path: '/org/webhook/disable', answers: { 200: webhook.WebhookSchema } },
  { method: 'get', path: '/org/webhook/deliveries', answers: { 200: webhook.WebhookDeliveryListSchema } },
  // session.ts
  { method: 'get', path: '/console/api/session', answers: { 200: consoleRoutes.ConsoleSessionSchema } },
  {
    method: 'post',
    path: '/console/api/sign-up',
    answers: { 201: consoleRoutes.ConsoleSessionSchema },
    body: consoleRoutes.SignUpBody,
  },
  {
    method: 'post',
    path: '/console/api/sign-in',
    answers: {
      200: { anyOf: [consoleRoutes.ConsoleSessionSchema, consoleRoutes.OrganizationChoiceSchema] },
    },
    body: consoleRoutes.SignInBody,
  },
  { method: 'post', path: '/console/api/sign-out', answers: { 204: null } },
  {
    method: 'post',
    path: '/console/api/password',
    answers: { 204: null },
    body: consoleRoutes.ChangePasswordBody,
  },
  {
    method: 'get',
    path: '/console/api/invites/{token}',
    answers: { 200: consoleRoutes.InvitePreviewSchema },
  },
  {
    method: 'post',
    path: '/console/api/invites/{token}/accept',
    answers: { 201: consoleRoutes.ConsoleSessionSchema },
    body: consoleRoutes.AcceptInviteBody,
  },
];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type OpenApiDocument = {
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, Json> };
};
type OpenApiOperation = {
  requestBody?: { content: Record<string, { schema: Json }> };
  responses: Record<string, { content?: Record<string, { schema: Json }> }>;
};

/**
 * One form for both sides: the document's `$ref`s inlined, names (`$id`, `title`) and the notation the OpenAPI
 * plugin rewrites (`const` as a one-value `enum`, a record's `patternProperties` as `additionalProperties`) set
 * aside, so only the shapes are compared.
 */
const ANY_NAME = '^(.*)$';

function shapeOf(schema: unknown, components: Record<string, Json>): Json {
  if (Array.isArray(schema)) return schema.map((item) => shapeOf(item, components));
  if (schema === null || typeof schema !== 'object') return schema as Json;
  const object = schema as Record<string, unknown>;
  if (typeof object.$ref === 'string') {
    const name = object.$ref.replace('#/components/schemas/', '');
    return shapeOf(components[name], components);
  }
  const shape: Record<string, Json> = {};
  for (const [key, value] of Object.entries(object)) {
    if (key === '$id' || key === 'title') continue;
    if (key === 'const') shape.enum = [value as Json];
    else if (key === 'patternProperties' && Object.keys(value as object).join() === ANY_NAME) {
      shape.additionalProperties = shapeOf((value as Record<string, unknown>)[ANY_NAME], components);
    } else shape[key] = shapeOf(value, components);
  }
  return shape;
}

const API_DIRECTORY = new URL('../src/api/', import.meta.url);

/**
 * Every call the console's API layer makes, as `METHOD /path` with each path value written `{}`: the `api.get`,
 * `api.post`, ... and `request('GET', ...)` calls of console/src/api/*.ts, with the path helpers each module
 * defines (`const subscriberPath = (id: string) => \`/org/subscribers/${segment(id)}\``, `const base = '...'`)
 * written out, so a call added there without a line in CONSOLE_CALLS fails.
 */
function callsInConsoleSource(): string[] {
  const calls: string[] = [];
  for (const file of readdirSync(API_DIRECTORY).filter((name) => name.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, API_DIRECTORY), 'utf8');
    const helpers = new Map<string, string>();
    for (const [, name, template] of source.matchAll(/const (\w+) = \([^)]*\) => `([^`]*)`/g)) {
      helpers.set(name!, template!);
    }
    for (const [, name, value] of source.matchAll(/const (\w+) = '([^']*)';/g)) helpers.set(name!, value!);
    const expand = (expression: string): string => {
      const helperCall = /^(\w+)\(.*\)$/.exec(expression);
      let path = helperCall ? (helpers.get(helperCall[1]!) ?? expression) : expression.slice(1, -1);
      path = path.replace(/\$\{(\w+)(\([^}]*\))?\}/g, (whole, name: string) => helpers.get(name) ?? whole);
      return path.replace(/\$\{[^}]*\}/g, '{}');
    };
    const callPattern =
      /\bapi\.(get|post|put|patch|delete)(?:<[^(]*>)?\(\s*('[^']*'|`[^`]*`|\w+\([^)]*\))|\brequest<[^(]*>\(\s*'(\w+)',\s*('[^']*'|`[^`]*`)/g;
    for (const [, apiMethod, apiPath, requestMethod, requestPath] of source.matchAll(callPattern)) {
      calls.push(`${(apiMethod ?? requestMethod)!.toUpperCase()} ${expand((apiPath ?? requestPath)!)}`);
    }
  }
  return calls.sort();
}

let ctx: AdminTestContext;
let document: OpenApiDocument;

beforeAll(async () => {
  ctx = await createAdminContext();
  document = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
}, 60_000);
afterAll(async () => {
  await ctx?.close();
});

describe('the console and the served API agree', () => {
  const served = (call: ConsoleCall) => document.paths[call.path]?.[call.method];
  const shape = (schema: unknown) => shapeOf(schema, document.components?.schemas ?? {});
  const contractShape = (schema: object) => shape(JSON.parse(JSON.stringify(schema)));

  it('lists every call of the console API layer', () => {
    const listed = CONSOLE_CALLS.map(
      (call) => `${call.method.toUpperCase()} ${call.path.replace(/\{\w+\}/g, '{}')}`,
    );
    expect(callsInConsoleSource()).toEqual(listed.sort());
  });

  it.each(CONSOLE_CALLS.map((call) => [`${call.method.toUpperCase()} ${call.path}`, call] as const))(
    '%s answers and accepts the contract schemas',
    (_name, call) => {
      const operation = served(call);
      expect(operation, 'the route is served').toBeDefined();
      const answers = Object.fromEntries(
        Object.entries(operation!.responses)
          .filter(([status]) => status.startsWith('2'))
          .map(([status, answer]) => [
            status,
            answer.content ? shape(answer.content['application/json']?.schema) : null,
          ]),
      );
      const expected = Object.fromEntries(
        Object.entries(call.answers).map(([status, schema]) => [
          status,
          schema ? contractShape(schema) : null,
        ]),
      );
      expect(answers).toEqual(expected);
      const body = operation!.requestBody?.content['application/json']?.schema;
      expect(body === undefined ? undefined : shape(body)).toEqual(
        call.body ? contractShape(call.body) : undefined,
      );
    },
  );
});
