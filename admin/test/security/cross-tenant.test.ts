import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { createAdminContext, createTestOrganization, type AdminTestContext, type TestOrganization } from '../../../test-support/admin-context.ts';
import { buildGatewayApp, type GatewayApp } from '../../../gateway/src/app.ts';
import { isGatewayRoute, operationsOf, type Method, type OpenApiDocument, type Operation } from './fuzz/requests.ts';
import type { JsonSchema } from './fuzz/schema-arbitrary.ts';
import { seedTenant, type TenantData } from './tenant-data.ts';

/**
 * Every route of the OpenAPI document, called with one organization's own full-access key and the other
 * organization's ids in its path, query and body: reads are 404 (or a list without the other's data), nothing
 * of the other organization changes (its rows, its audit log, its eval count), and no 2xx body carries its ids.
 */
let ctx: AdminTestContext;
let gateway: GatewayApp;
let document: OpenApiDocument;
const tenants: Record<'a' | 'b', { org: TestOrganization; data: TenantData }> = {} as never;

beforeAll(async () => {
  ctx = await createAdminContext();
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = ctx.app.server.address() as AddressInfo;
  gateway = await buildGatewayApp({ config: { ...ctx.config, adminUrl: `http://127.0.0.1:${port}` }, logger: false });
  await gateway.ready();
  for (const name of ['a', 'b'] as const) {
    const org = await createTestOrganization(ctx.db, `Org ${name}`);
    tenants[name] = { org, data: await seedTenant(ctx.app, org.headers, `${name}x`) };
  }
  document = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDocument;
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await ctx?.close();
});

/** Every row of one organization in every table that has an organization_id, plus its plans' grants. */
async function rowsOf(organizationId: string): Promise<Record<string, unknown[]>> {
  const tables = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name = 'organization_id' ORDER BY table_name`.execute(ctx.ownerDb);
  const rows: Record<string, unknown[]> = {};
  for (const { table_name } of tables.rows) {
    const result = await sql`SELECT * FROM ${sql.table(table_name)} WHERE organization_id = ${organizationId}`.execute(ctx.ownerDb);
    rows[table_name] = result.rows.map((row) => JSON.stringify(row)).sort();
  }
  const grants = await sql`
    SELECT g.* FROM plan_grants g JOIN plans p ON p.id = g.plan_id WHERE p.organization_id = ${organizationId}`.execute(ctx.ownerDb);
  rows.plan_grants = grants.rows.map((row) => JSON.stringify(row)).sort();
  const organization = await sql`SELECT * FROM organizations WHERE id = ${organizationId}`.execute(ctx.ownerDb);
  rows.organizations = organization.rows.map((row) => JSON.stringify(row));
  return rows;
}


/** A path value for this parameter of this route: `{key}` is a plan key under /org/plans, a feature key elsewhere. */
const pathIdFor = (path: string, name: string, data: TenantData): string =>
  (name === 'key' && path.startsWith('/org/plans') ? data.key[2] : idFor(name, data))!;

/** The ids a request may carry, by the name of the field or parameter that holds them. */
function idFor(name: string, data: TenantData): string | undefined {
  const byName: Record<string, string | undefined> = {
    subscriber_id: data.subscriber_id[0],
    key: data.key[0],
    feature_key: data.feature_key[0],
    feature: data.feature_key[0],
    plan_id: data.key[2],
    subscription_id: data.subscription_id[0],
    member_id: data.member_id[0],
    actor_member_id: data.member_id[0],
    service_account_id: data.service_account_id[0],
    key_id: data.key_id[0],
    invite_id: data.invite_id[0],
  };
  return byName[name];
}

/** A body the schema accepts, with the victim's id in every field that names one; `full` adds optional fields. */
function bodyWithIds(schema: JsonSchema, data: TenantData, full: boolean, name = ''): unknown {
  const id = idFor(name, data);
  if (id !== undefined) return id;
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return name === 'role' ? 'viewer' : schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const role = alternatives.find((s) => s.enum?.includes('viewer'));
    if (role) return 'viewer';
    return bodyWithIds(alternatives.find((s) => s.type !== 'null') ?? alternatives[0]!, data, full, name);
  }
  switch (schema.type) {
    case 'string':
      if (name === 'url') return 'http://127.0.0.1:9/probe';
      if (schema.format === 'email') return 'probe@example.test';
      if (schema.format === 'date-time') return '2099-01-01T00:00:00Z';
      return schema.pattern ? 'probe_1' : 'probe';
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return name === 'scopes' ? ['check'] : schema.items ? [bodyWithIds(schema.items, data, full, name === 'grants' ? '' : name)] : [];
    case 'object': {
      const value: Record<string, unknown> = {};
      const required = new Set(schema.required ?? []);
      for (const [field, inner] of Object.entries(schema.properties ?? {})) {
        if (full || required.has(field)) value[field] = bodyWithIds(inner, data, full, field);
      }
      if (name === '' && 'kind' in value && 'limit' in value && value.kind === 'flag') delete value.limit;
      return value;
    }
    default:
      return null;
  }
}

interface Probe {
  operation: Operation;
  url: string;
  payload?: unknown;
  /** Whether a victim id is in the path: the request names a resource the caller's organization lacks. */
  victimInPath: boolean;
  /** The path names the caller's own resources and the body the victim's ids (plan, subscription, feature). */
  ownPathVictimBody?: boolean;
}

/** Path fillings: every value the victim's; and, where there are several, each with one of the caller's own. */
function pathFillings(operation: Operation, victim: TenantData, own: TenantData): Array<{ url: string; victimInPath: boolean }> {
  const names = operation.parameters.filter((p) => p.in === 'path').map((p) => p.name);
  if (names.length === 0) return [{ url: operation.path, victimInPath: false }];
  const fill = (choose: (name: string, index: number) => TenantData) =>
    names.reduce((url, name, index) => url.replace(`{${name}}`, encodeURIComponent(pathIdFor(operation.path, name, choose(name, index)))), operation.path);
  const fillings = [{ url: fill(() => victim), victimInPath: true }];
  for (let ownIndex = 0; ownIndex < names.length && names.length > 1; ownIndex++) {
    fillings.push({ url: fill((_, index) => (index === ownIndex ? own : victim)), victimInPath: true });
  }
  return fillings;
}

function probesFor(operation: Operation, victim: TenantData, own: TenantData, victimRequestId: string): Probe[] {
  const probes: Probe[] = [];
  for (const { url, victimInPath } of pathFillings(operation, victim, own)) {
    const bodies = operation.body ? [bodyWithIds(operation.body, victim, false), bodyWithIds(operation.body, victim, true)] : [undefined];
    for (const payload of bodies) probes.push({ operation, url, payload, victimInPath });
  }
  const queryParameters = operation.parameters.filter((p) => p.in === 'query').map((p) => p.name);
  const victimServerIds = [...victim.subscription_id, ...victim.member_id, ...victim.service_account_id, ...victim.key_id, ...victim.invite_id];
  const queries: string[] = [];
  if (queryParameters.includes('starting_after')) {
    for (const id of [...victimServerIds, ...victim.subscriber_id, ...victim.key]) queries.push(`starting_after=${id}`);
  }
  if (queryParameters.includes('actor_member_id')) for (const id of victim.member_id) queries.push(`actor_member_id=${id}`);
  if (queryParameters.includes('request_id')) queries.push(`request_id=${victimRequestId}`);
  if (operation.path === '/org/audit-events') {
    queries.push(`params[subscriber_id]=${victim.subscriber_id[0]}`, `params[key]=${victim.key[0]}`);
  }
  // The path names the caller's own resource, so only the query or the body carries the victim's ids.
  const ownUrl = operation.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(pathIdFor(operation.path, name, own)));
  if (operation.body && ownUrl !== operation.path) {
    for (const full of [false, true]) {
      probes.push({ operation, url: ownUrl, payload: bodyWithIds(operation.body, victim, full), victimInPath: false, ownPathVictimBody: true });
    }
  }
  for (const query of queries) probes.push({ operation, url: `${ownUrl}?${query}`, victimInPath: false });
  return probes;
}

/** Ids of the same shape as the victim's that exist in no organization. */
function ghostOf(data: TenantData): TenantData {
  const ghost = (id: string) => `${id.slice(0, -3)}000`;
  return Object.fromEntries(Object.entries(data).map(([name, ids]) => [name, (ids as string[]).map(ghost)])) as unknown as TenantData;
}

/** Whether a list body is empty: every array property has no items. */
const isEmptyList = (body: Record<string, unknown>): boolean =>
  Object.values(body).every((value) => !Array.isArray(value) || value.length === 0);

/** The victim's ids no other organization can hold: the server generates them. */
const serverIds = (org: TestOrganization, data: TenantData): string[] => [
  org.organization_id,
  ...data.subscription_id,
  ...data.member_id,
  ...data.service_account_id,
  ...data.key_id,
  ...data.invite_id,
];

describe.each([
  ['b', 'a'],
  ['a', 'b'],
] as const)('organization %s probing organization %s', (callerName, victimName) => {
  it('reads nothing and changes nothing of the other organization through any route of the document', async () => {
    const caller = tenants[callerName];
    const victim = tenants[victimName];
    const victimRequestId = (
      await ctx.ownerDb.selectFrom('audit_events').select('request_id').where('organization_id', '=', victim.org.organization_id).executeTakeFirstOrThrow()
    ).request_id;
    const usage = async () => (await gateway.inject({ method: 'GET', url: '/org/usage/current', headers: victim.org.headers })).body;
    const usageBefore = await usage();
    const rowsBefore = await rowsOf(victim.org.organization_id);

    const operations = operationsOf(document);
    // The same requests with ids of the same shape that exist nowhere: a victim's resource must look exactly
    // like one that does not exist (same status, same code), so the probe learns nothing from the answer.
    const ghost = ghostOf(victim.data);
    const pairs = operations.flatMap((operation) => {
      const real = probesFor(operation, victim.data, caller.data, victimRequestId);
      const absent = probesFor(operation, ghost, caller.data, 'req_00000000000000000000000000');
      return real.map((probe, index) => ({ probe, absent: absent[index]! }));
    });
    // Requests whose path names a victim resource first: the body probes below may create same-named
    // resources (a subscriber id, a feature key) in the caller's own organization, which is allowed.
    // Then the caller's own resources given victim ids in the body, before anything can create same-named ones.
    const order = (probe: Probe) => (probe.victimInPath ? 0 : probe.ownPathVictimBody ? 1 : 2);
    pairs.sort((x, y) => order(x.probe) - order(y.probe));
    const probes = pairs.map((pair) => pair.probe);
    const secrets = serverIds(victim.org, victim.data);
    const problems: string[] = [];
    const send = (probe: Probe) =>
      (isGatewayRoute(probe.operation) ? gateway : ctx.app).inject({
        method: probe.operation.method as Method,
        url: probe.url,
        headers: caller.org.headers,
        ...(probe.payload === undefined ? {} : { payload: probe.payload as object }),
      });
    for (const { probe, absent } of pairs) {
      const res = await send(probe);
      const label = `${probe.operation.method} ${probe.url} ${JSON.stringify(probe.payload ?? null)} -> ${res.statusCode} ${res.body.slice(0, 200)}`;
      if (res.statusCode >= 500) problems.push(`5xx: ${label}`);
      if (res.statusCode < 300 && probe.operation.path === '/org/audit-events') {
        // The caller's own entries may quote the victim ids it sent; they must all be the caller's own.
        const entries = (res.json() as { audit_events: Array<{ organization_id: string }> }).audit_events;
        if (entries.some((entry) => entry.organization_id !== caller.org.organization_id)) problems.push(`foreign entry: ${label}`);
      } else if (res.statusCode < 300) {
        const leaked = secrets.find((id) => res.body.includes(id));
        if (leaked) problems.push(`leaks ${leaked}: ${label}`);
      }
      if (probe.ownPathVictimBody && res.statusCode < 300) {
        const named = [...victim.data.key, ...victim.data.subscriber_id].find((id) => res.body.includes(id));
        if (named) problems.push(`accepted the victim's ${named}: ${label}`);
      }
      if (probe.victimInPath) {
        const emptyList = probe.operation.method === 'GET' && res.statusCode === 200 && isEmptyList(res.json() as Record<string, unknown>);
        if (probe.operation.method === 'GET' && res.statusCode !== 404 && !emptyList) problems.push(`read not 404: ${label}`);
        if (res.statusCode < 300 && !emptyList) problems.push(`applied: ${label}`);
        const control = await send(absent);
        const code = (body: string) => (JSON.parse(body || '{}') as { error?: { code?: string } }).error?.code;
        if (control.statusCode !== res.statusCode || code(control.body) !== code(res.body)) {
          problems.push(`differs from an absent id (${control.statusCode} ${code(control.body)}): ${label}`);
        }
      }
    }
    expect(probes.length).toBeGreaterThan(100);
    expect(problems).toEqual([]);

    expect(await rowsOf(victim.org.organization_id)).toEqual(rowsBefore);
    expect(await usage()).toBe(usageBefore);
  }, 120_000);
});

