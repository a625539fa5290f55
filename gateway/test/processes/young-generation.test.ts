import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../../test-support/databases.ts';
import { testRedisPrefix } from '../../../test-support/redis-keys.ts';
import { GATEWAY_NODE_FLAGS, YOUNG_GENERATION_MB } from '../../src/runtime-flags.ts';
import { freePort, healthy, serviceEnv, start, waitFor, type Started } from '../processes.ts';

/**
 * A gateway's young generation has a fixed floor however it is started (gateway/src/runtime-flags.ts), so that its
 * cost per eval does not depend on its history: V8 would otherwise start it at 1 MiB and cut it back there after
 * every quiet spell. Read as a size (V8's heap-space statistics), never as a time.
 */
const root = fileURLToPath(new URL('../../..', import.meta.url));
const read = (path: string) => readFileSync(`${root}/${path}`, 'utf8');
const GATEWAY_SCRIPT = 'gateway/src/server.ts';
/** What the image, compose and Kubernetes run: the gateway built by `npm run build`. */
const COMPILED_GATEWAY_SCRIPT = 'dist/gateway.js';
const run = promisify(execFile);

/** The node arguments of package.json's `gateway` script (`... exec node <args> gateway/src/server.ts`). */
function npmGatewayArgs(): string[] {
  const script = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.gateway!;
  const command = /exec node (.*)$/.exec(script)?.[1];
  if (!command) throw new Error(`package.json's gateway script runs no node: ${script}`);
  return command.trim().split(/\s+/);
}

let database: TestDatabase;
let env: Record<string, string>;
const started: Started[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  ({ env } = await serviceEnv({ database, redisPort: 6379, prefix: testRedisPrefix(), logLevel: 'warn' }));
}, 60_000);

afterAll(async () => {
  await Promise.all(started.map((process) => process.stop()));
  await database?.drop();
}, 60_000);

/** A gateway started with `args` and healthy; its output holds what it logged at start. */
async function gatewayWith(args: string[]): Promise<Started> {
  const port = await freePort();
  const gateway = start(process.execPath, args, { ...env, GATEWAY_PORT: String(port) });
  started.push(gateway);
  await healthy(`http://127.0.0.1:${port}`);
  return gateway;
}

/**
 * The young generation's size (bytes) in a node started with `flags`, after a busy phase, a quiet spell longer than
 * the 5 s over which V8 averages the allocation rate, and a full collection: what a gateway falls back to after an
 * idle gap between bursts of evals.
 */
async function youngGenerationAfterQuietSpell(flags: readonly string[]): Promise<number> {
  const probe = `
    const { getHeapSpaceStatistics } = require('node:v8');
    let kept = [];
    for (let i = 0; i < 2e6; i++) { kept.push({ i }); if (kept.length > 5e4) kept = []; }
    kept = null;
    setTimeout(() => {
      globalThis.gc();
      process.stdout.write(String(getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size));
    }, 6000);`;
  const { stdout } = await run(process.execPath, [...flags, '--expose-gc', '-e', probe], {
    encoding: 'utf8',
  });
  return Number(stdout);
}

describe("a gateway's young generation", () => {
  it('stays at its floor through a quiet spell with the flags `npm run gateway` starts it with (V8 alone: 1 MiB)', async () => {
    const args = npmGatewayArgs();
    expect(args.at(-1)).toBe(GATEWAY_SCRIPT);
    const v8Flags = args.filter((arg) => arg.startsWith('--') && arg !== '--import');
    const [unfixed, fixed] = await Promise.all([
      youngGenerationAfterQuietSpell([]),
      youngGenerationAfterQuietSpell(v8Flags),
    ]);
    expect(unfixed).toBeLessThan(YOUNG_GENERATION_MB * 2 ** 20);
    expect(fixed).toBeGreaterThanOrEqual(YOUNG_GENERATION_MB * 2 ** 20);
  }, 60_000);

  it('is said to have no floor, at start, by a gateway started without its flags (and only by such a one)', async () => {
    const [deployed, bare] = await Promise.all([
      gatewayWith(npmGatewayArgs()),
      gatewayWith(['--import', 'tsx', GATEWAY_SCRIPT]),
    ]);
    await waitFor(async () => bare.output().includes('young generation will shrink'), 'the warning', 10_000);
    expect(bare.output()).toContain(GATEWAY_NODE_FLAGS[0]);
    expect(deployed.output()).not.toContain('young generation');
  }, 90_000);

  it('is fixed by every deployment this repository ships (Dockerfile, compose, Kubernetes)', () => {
    const commands = [
      ...read('deploy/Dockerfile')
        .split('\n')
        .filter((line) => line.startsWith('CMD')),
      ...[read('deploy/compose.yaml'), read('deploy/k8s/entitlements.yaml')].flatMap((file) =>
        file
          .split('\n')
          .filter((line) => /^\s*(command|args):/.test(line) && line.includes(COMPILED_GATEWAY_SCRIPT)),
      ),
    ];
    expect(commands).toHaveLength(3);
    for (const command of commands) {
      for (const flag of GATEWAY_NODE_FLAGS) expect(command, command).toContain(flag);
    }
  });
});
