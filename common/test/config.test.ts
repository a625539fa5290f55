import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { assertSecretsKeyringUsable } from '../src/crypto/keyring.ts';
import { encryptSecret } from '../../admin/src/crypto/secrets.ts';

describe('loadConfig', () => {
  it('falls back to the documented defaults', () => {
    const config = loadConfig({});
    expect(config.gatewayPort).toBe(3000);
    expect(config.adminUrl).toBe('http://127.0.0.1:3001');
    expect(config.redisCommandTimeoutMs).toBe(1000);
    expect(config.bodyLimitBytes).toBe(1024 * 1024);
    expect(config.gatewayCacheBytes).toBe(512 * 1024 * 1024);
    expect(config.catalogLimits).toEqual({ features: 1000, plans: 500, grants: 25_000 });
  });

  it('reads sizes and timeouts from the environment', () => {
    const config = loadConfig({
      GATEWAY_CACHE_MB: '64',
      CATALOG_MAX_FEATURES: '350',
      REDIS_COMMAND_TIMEOUT_MS: '250',
      BODY_LIMIT_BYTES: '2048',
    });
    expect(config).toMatchObject({
      gatewayCacheBytes: 64 * 1024 * 1024,
      catalogLimits: { features: 350, plans: 500, grants: 25_000 },
      redisCommandTimeoutMs: 250,
      bodyLimitBytes: 2048,
    });
  });

  it.each([
    ['GATEWAY_CACHE_MB', 'lots', 'MiB between 1 and 1048576'],
    ['GATEWAY_CACHE_MB', '0', 'MiB between 1 and 1048576'],
    ['CATALOG_MAX_FEATURES', '0', 'an integer between 1 and 100000'],
    ['REDIS_COMMAND_TIMEOUT_MS', '-5', 'a positive integer'],
    ['BODY_LIMIT_BYTES', '1.5', 'a positive integer'],
  ])('refuses %s=%s at startup instead of running with a nonsense value', (name, value, what) => {
    expect(() => loadConfig({ [name]: value })).toThrow(`${name} must be ${what}, got "${value}"`);
  });

  it('hashes console passwords at scrypt N=2^15 by default, and takes a cheaper PASSWORD_HASH_COST only under NODE_ENV=test', () => {
    expect(loadConfig({}).passwordHashCost).toBe(15);
    expect(loadConfig({ PASSWORD_HASH_COST: '16' }).passwordHashCost).toBe(16);
    expect(loadConfig({ PASSWORD_HASH_COST: '10', NODE_ENV: 'test' }).passwordHashCost).toBe(10);
    for (const nodeEnv of [undefined, '', 'production', 'development']) {
      expect(() => loadConfig({ PASSWORD_HASH_COST: '10', NODE_ENV: nodeEnv })).toThrow(
        'PASSWORD_HASH_COST below 15 is for tests only (NODE_ENV=test)',
      );
    }
    expect(() => loadConfig({ PASSWORD_HASH_COST: '18' })).toThrow(
      'PASSWORD_HASH_COST must be an integer between 1 and 17',
    );
  });

  it('refuses a port outside 0-65535', () => {
    expect(() => loadConfig({ GATEWAY_PORT: '70000' })).toThrow('GATEWAY_PORT must be a TCP port');
  });

  const KEY = 'a1'.repeat(32);
  const PREVIOUS = Buffer.alloc(32, 7).toString('base64');

  it('reads SECRETS_KEY and SECRETS_KEY_PREVIOUS into a keyring', () => {
    const { secretsKey } = loadConfig({
      SECRETS_KEY: KEY,
      SECRETS_KEY_PREVIOUS: ` ${PREVIOUS} ,${KEY}`,
      HOST: '0.0.0.0',
      NODE_ENV: 'production',
    });
    expect(secretsKey.refusal).toBeNull();
    expect(secretsKey.previous.map((k) => k.id)).toEqual([
      loadConfig({ SECRETS_KEY: PREVIOUS }).secretsKey.current.id,
    ]);
    expect(() => assertSecretsKeyringUsable(secretsKey)).not.toThrow();
  });

  it.each([
    ['SECRETS_KEY', 'not-a-key'],
    ['SECRETS_KEY', 'ab'.repeat(16)],
    ['SECRETS_KEY_PREVIOUS', 'ab'.repeat(40)],
  ])('refuses %s=%s at startup', (name, value) => {
    expect(() => loadConfig({ SECRETS_KEY: KEY, [name]: value })).toThrow(`${name} must be 32 bytes`);
  });

  it('refuses SECRETS_KEY_PREVIOUS without SECRETS_KEY', () => {
    expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: PREVIOUS })).toThrow(
      'SECRETS_KEY_PREVIOUS is set but SECRETS_KEY is not',
    );
  });

  it.each([
    ['127.0.0.1', undefined],
    ['localhost', 'development'],
    ['::1', 'test'],
  ])('uses the development key on HOST=%s with NODE_ENV=%s', (host, nodeEnv) => {
    const { secretsKey } = loadConfig({ HOST: host, NODE_ENV: nodeEnv });
    expect(() => assertSecretsKeyringUsable(secretsKey)).not.toThrow();
    expect(encryptSecret('x', secretsKey, 'ctx')).toMatch(/^v2\./);
  });

  it.each([
    ['0.0.0.0', undefined],
    ['10.1.2.3', 'development'],
    ['admin.internal', undefined],
    ['127.0.0.1', 'production'],
  ])(
    'refuses the development key on HOST=%s with NODE_ENV=%s, at startup and on every use',
    (host, nodeEnv) => {
      const { secretsKey } = loadConfig({ HOST: host, NODE_ENV: nodeEnv });
      expect(() => assertSecretsKeyringUsable(secretsKey)).toThrow('SECRETS_KEY is not set');
      expect(() => assertSecretsKeyringUsable(secretsKey)).toThrow('openssl rand -base64 32');
      expect(() => encryptSecret('x', secretsKey, 'ctx')).toThrow('SECRETS_KEY is not set');
    },
  );
});
