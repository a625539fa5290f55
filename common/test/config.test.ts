import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';

describe('loadConfig', () => {
  it('falls back to the documented defaults', () => {
    const config = loadConfig({});
    expect(config.gatewayPort).toBe(3000);
    expect(config.adminUrl).toBe('http://127.0.0.1:3001');
    expect(config.redisCommandTimeoutMs).toBe(1000);
    expect(config.bodyLimitBytes).toBe(1024 * 1024);
    expect(config.gatewayCacheSubscribers).toBe(200_000);
  });

  it('reads sizes and timeouts from the environment', () => {
    const config = loadConfig({ GATEWAY_CACHE_SUBSCRIBERS: '5000', REDIS_COMMAND_TIMEOUT_MS: '250', BODY_LIMIT_BYTES: '2048' });
    expect(config).toMatchObject({ gatewayCacheSubscribers: 5000, redisCommandTimeoutMs: 250, bodyLimitBytes: 2048 });
  });

  it.each([
    ['GATEWAY_CACHE_SUBSCRIBERS', 'lots'],
    ['GATEWAY_CACHE_SUBSCRIBERS', '0'],
    ['REDIS_COMMAND_TIMEOUT_MS', '-5'],
    ['BODY_LIMIT_BYTES', '1.5'],
  ])('refuses %s=%s at startup instead of running with a nonsense value', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(`${name} must be a positive integer, got "${value}"`);
  });

  it('refuses a port outside 0-65535', () => {
    expect(() => loadConfig({ GATEWAY_PORT: '70000' })).toThrow('GATEWAY_PORT must be a TCP port');
  });
});
