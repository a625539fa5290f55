import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startNode, type Started } from '../../../gateway/test/processes.ts';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';

const KEY = 'b2'.repeat(32);
let database: TestDatabase;
const started: Started[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await Promise.all(started.map((process) => process.stop()));
});

/** Runs a real admin or worker process; resolves with its exit code and output, or fails after 30 s. */
async function exitOf(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const child = startNode(script, {
    DATABASE_URL: database.appUrl,
    DATABASE_OWNER_URL: database.ownerUrl,
    REDIS_KEY_PREFIX: testRedisPrefix(),
    ADMIN_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
    SECRETS_KEY_PREVIOUS: '',
    ...env,
  });
  started.push(child);
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} still running: ${child.output()}`)), 30_000);
    child.child.once('exit', (exitCode) => {
      clearTimeout(timer);
      resolve(exitCode);
    });
  });
  return { code, output: child.output() };
}

describe('startup refusals (real processes)', () => {
  it('admin on a non-loopback HOST without INTERNAL_TOKEN exits non-zero, saying to set it', async () => {
    const { code, output } = await exitOf('admin/src/server.ts', {
      HOST: '0.0.0.0',
      INTERNAL_TOKEN: '',
      SECRETS_KEY: KEY,
    });
    expect(code).not.toBe(0);
    expect(output).toContain(
      'INTERNAL_TOKEN must be set when admin listens on a non-loopback address (HOST=0.0.0.0)',
    );
  });

  it.each([
    ['admin/src/server.ts', '0.0.0.0', ''],
    ['admin/src/worker.ts', '0.0.0.0', ''],
    ['admin/src/server.ts', '127.0.0.1', 'production'],
    ['admin/src/worker.ts', '127.0.0.1', 'production'],
  ])(
    '%s with HOST=%s NODE_ENV=%s and no SECRETS_KEY exits non-zero, saying to set SECRETS_KEY',
    async (script, host, nodeEnv) => {
      const { code, output } = await exitOf(script, {
        HOST: host,
        NODE_ENV: nodeEnv,
        INTERNAL_TOKEN: 'token',
        SECRETS_KEY: '',
      });
      expect(code).not.toBe(0);
      expect(output).toContain('SECRETS_KEY is not set');
      expect(output).toContain('openssl rand -base64 32');
    },
  );

  it('admin with a malformed SECRETS_KEY exits non-zero, saying what a key must be', async () => {
    const { code, output } = await exitOf('admin/src/server.ts', { SECRETS_KEY: 'abc', INTERNAL_TOKEN: '' });
    expect(code).not.toBe(0);
    expect(output).toContain('SECRETS_KEY must be 32 bytes, as 64 hex characters or base64');
  });

  it.each(['production', ''])(
    'admin with a test-only PASSWORD_HASH_COST and NODE_ENV=%s exits non-zero, saying the cost is for tests only',
    async (nodeEnv) => {
      const { code, output } = await exitOf('admin/src/server.ts', {
        PASSWORD_HASH_COST: '10',
        NODE_ENV: nodeEnv,
        SECRETS_KEY: KEY,
        INTERNAL_TOKEN: '',
      });
      expect(code).not.toBe(0);
      expect(output).toContain('PASSWORD_HASH_COST below 15 is for tests only (NODE_ENV=test)');
    },
  );
});
