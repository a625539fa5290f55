import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '@ent/common/db/connect';
import { createTestOrganization, type TestOrganization } from '../../../test-support/admin-context.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { healthy, serviceEnv, startGateways, startNode, type Started } from '../processes.ts';

/** The README's walk-through, run as written (bash, curl) against real admin and gateway processes. */
const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const section = readme.slice(readme.indexOf('## Walk-through'), readme.indexOf('## `entctl`'));
const fence = /```(\w+)\n([\s\S]*?)```/.exec(section)!;

let database: TestDatabase;
let db: ReturnType<typeof createDb>;
let org: TestOrganization;
let gatewayUrl: string;
const started: Started[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  const { env, adminUrl } = await serviceEnv({ database, redisPort: 6379, prefix: testRedisPrefix() });
  started.push(startNode('admin/src/server.ts', env));
  await healthy(adminUrl);
  const { gateways, urls } = await startGateways(env, 1);
  started.push(...gateways);
  gatewayUrl = urls[0]!;
  db = createDb(database.appUrl, { max: 2 });
  org = await createTestOrganization(db, 'Acme');
}, 120_000);

afterAll(async () => {
  await Promise.all(started.map((process) => process.stop()));
  await db?.destroy();
  await database?.drop();
}, 60_000);

describe('README walk-through', () => {
  it('is marked bash, the shell its arrays need', () => {
    expect(fence[1]).toBe('bash');
    expect(fence[2]).toContain('"${H[@]}"');
  });

  it('runs as written: every answer on its own line, the calls answered as the comments say', async () => {
    const script = fence[2]!
      .replace(/^BASE=.*$/m, `BASE=${gatewayUrl}`)
      .replace(/^KEY=.*$/m, `KEY=${org.api_key}`);
    const { stdout } = await promisify(execFile)('bash', ['-e', '-c', script], { timeout: 60_000 });
    const lines = stdout.split('\n');
    expect(lines.at(-1)).toBe('');
    const answers = lines.slice(0, -1).map((line) => JSON.parse(line));
    const curls = script.match(/^curl /gm)!.length;
    expect(answers).toHaveLength(curls);
    expect(answers).toContainEqual({ feature: 'sso', kind: 'flag', allowed: true, source: 'plan' });
    expect(answers).toContainEqual({ feature: 'seats', kind: 'limit', limit: 10, source: 'plan' });
    expect(answers).toContainEqual({
      subscriber_id: 'cust_42',
      entitlements: [
        { feature: 'seats', kind: 'limit', limit: 50, source: 'override' },
        { feature: 'sso', kind: 'flag', allowed: true, source: 'plan' },
      ],
    });
    // Metered (DESIGN.md §5): the consume deducts 1, the report adds 50, each answering the check result.
    const metered = { feature: 'api_calls', kind: 'metered', limit: 1000, allowed: true, source: 'plan' };
    expect(answers).toContainEqual(expect.objectContaining({ ...metered, used: 1, remaining: 999 }));
    expect(answers).toContainEqual(expect.objectContaining({ ...metered, used: 51, remaining: 949 }));
    // The free allotment the README names after the block is what a new organization gets.
    const usage = answers.find((answer) => 'period' in answer);
    expect(usage).toMatchObject({ plan: 'free', limit: 250_000 });
    const arrangement = await db
      .selectFrom('organizations')
      .select(['eval_limit', 'eval_burst'])
      .where('id', '=', org.organization_id)
      .executeTakeFirstOrThrow();
    expect(readme).toContain(
      `${Number(arrangement.eval_limit).toLocaleString('en-US')} evals a month and bursts of up to ${arrangement.eval_burst} eval requests a second`,
    );
  }, 90_000);
});
