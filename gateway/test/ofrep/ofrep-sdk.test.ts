import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OFREPProvider } from '@openfeature/ofrep-provider';
import { ErrorCode, OpenFeature, type Client } from '@openfeature/server-sdk';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { createDb } from '@ent/common/db/connect';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { readFile } from 'node:fs/promises';
import { openFeatureExample } from '../../examples/openfeature.ts';
import { catalogClient, seedProPlan } from '../helpers.ts';
import { healthy, httpClient, serviceEnv, startGateways, startNode, type Started } from '../processes.ts';

/** The unmodified OpenFeature server SDK and OFREP provider against real admin and gateway processes. */
let database: TestDatabase;
let admin: Started | undefined;
const gateways: Started[] = [];
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
let client: Client;
let gatewayUrl: string;

beforeAll(async () => {
  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix: testRedisPrefix() });
  admin = startNode('admin/src/server.ts', env);
  await healthy(adminUrl);
  const started = await startGateways(env, 1);
  gateways.push(...started.gateways);
  const url = started.urls[0]!;
  gatewayUrl = url;
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'OpenFeature org');
  const call = httpClient(url);
  const api = catalogClient(call, { 'x-api-key': org.api_key });
  await seedProPlan(api);
  await api.subscriber('bob');
  await api.override('bob', 'sso', { kind: 'flag', allowed: true });
  await api.subscriber('ann');
  await api.subscribe('ann', 'pro');
  await api.override('ann', 'seats', { kind: 'limit', limit: 40 });
  await OpenFeature.setProviderAndWait(
    new OFREPProvider({ baseUrl: url, headers: [['Authorization', `Bearer ${org.api_key}`]] }),
  );
  client = OpenFeature.getClient();
}, 90_000);

afterAll(async () => {
  await OpenFeature.close();
  await Promise.all([...gateways, admin].filter((p): p is Started => Boolean(p)).map((p) => p.stop()));
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('@openfeature/server-sdk with @openfeature/ofrep-provider', () => {
  it('evaluates a boolean flag from the plan (STATIC) and an override (TARGETING_MATCH)', async () => {
    const plan = await client.getBooleanDetails('sso', false, { targetingKey: 'alice' });
    expect(plan).toMatchObject({ value: true, reason: 'STATIC', variant: 'plan' });
    expect(plan.errorCode).toBeUndefined();
    const override = await client.getBooleanDetails('sso', false, { targetingKey: 'bob' });
    expect(override).toMatchObject({ value: true, reason: 'TARGETING_MATCH', variant: 'override' });
    expect(override.flagMetadata).toMatchObject({ source: 'override' });
  });

  it('evaluates a number limit, and an unlimited one as MAX_SAFE_INTEGER with metadata.unlimited', async () => {
    expect(await client.getNumberValue('seats', 0, { targetingKey: 'alice' })).toBe(25);
    expect(await client.getNumberValue('seats', 5, { targetingKey: 'bob' })).toBe(0);
    const unlimited = await client.getNumberDetails('storage', 0, { targetingKey: 'alice' });
    expect(unlimited.value).toBe(Number.MAX_SAFE_INTEGER);
    expect(unlimited.flagMetadata).toMatchObject({ unlimited: true, source: 'plan' });
  });

  it('falls back to the default with FLAG_NOT_FOUND for an unknown flag', async () => {
    const res = await client.getBooleanDetails('nope', true, { targetingKey: 'alice' });
    expect(res).toMatchObject({ value: true, reason: 'ERROR', errorCode: ErrorCode.FLAG_NOT_FOUND });
  });

  it('falls back to the default with TARGETING_KEY_MISSING without a targeting key', async () => {
    const res = await client.getBooleanDetails('sso', false, {});
    expect(res).toMatchObject({ value: false, reason: 'ERROR', errorCode: ErrorCode.TARGETING_KEY_MISSING });
  });

  it("runs docs/sdk.md's OpenFeature example as written", async () => {
    expect(await openFeatureExample(gatewayUrl, org.api_key)).toEqual({
      sso: true,
      seats: 40,
      reason: 'TARGETING_MATCH',
      source: 'override',
    });
    const guide = await readFile(new URL('../../../docs/sdk.md', import.meta.url), 'utf8');
    const example = (
      await readFile(new URL('../../examples/openfeature.ts', import.meta.url), 'utf8')
    ).trimEnd();
    expect(guide).toContain('```ts\n' + example + '\n```');
  });
});
