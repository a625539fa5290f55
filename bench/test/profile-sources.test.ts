import { describe, expect, it } from 'vitest';
import { combine, groupOf, sourceOf, stacksOf } from '../src/modes/profile.ts';

describe("the profile's charging of samples", () => {
  it('charges a sample to its nearest JavaScript frame: a file of ours, a package or a Node.js module', () => {
    const stack = (...frames: string[]) => ['Builtins_KeyedLoadIC_Megamorphic', ...frames];
    expect(sourceOf(stack('JS:*evaluate file:///work/main/gateway/src/routes/evaluator.ts:1:3155', 'JS:*x node:_http_server:1:1'))).toBe(
      'gateway/src/routes/evaluator.ts',
    );
    expect(sourceOf(stack('JS:*execute /srv/app/node_modules/ioredis/built/Script.js:37:12'))).toBe('pkg:ioredis');
    expect(sourceOf(stack('JS:*send /srv/app/node_modules/@fastify/ajv-compiler/index.js:1:1'))).toBe('pkg:@fastify/ajv-compiler');
    expect(sourceOf(stack('JS:*writevGeneric node:internal/stream_base_commons:123:23'))).toBe('node:internal/stream_base_commons');
  });

  it('tells the garbage collector from other native code when no JavaScript frame is on the stack', () => {
    expect(sourceOf(['v8::internal::ScavengerCollector::CollectGarbage', 'uv_run'])).toBe('v8:gc');
    expect(sourceOf(['llhttp__internal_execute', 'uv__read', 'uv_run'])).toBe('native');
  });

  it('groups sources by who owns the code', () => {
    expect(groupOf('gateway/src/routes/evaluator.ts')).toBe('ours');
    expect(groupOf('common/src/metering/gate-batcher.ts')).toBe('ours');
    expect(groupOf('pkg:find-my-way')).toBe('fastify');
    expect(groupOf('pkg:redis-parser')).toBe('redis-client');
    expect(groupOf('pkg:lru-cache')).toBe('other');
    expect(groupOf('node:_http_outgoing')).toBe('node-and-kernel');
    expect(groupOf('native')).toBe('node-and-kernel');
    expect(groupOf('v8:gc')).toBe('gc');
  });

  it("reads perf script's stacks: one frame per line, samples apart by a blank line", () => {
    const script = '\t    7f43 JS:*a node:net:1:1\n\t  14ce0dc Builtins_JSEntry\n\n\t ffff81 clear_page_erms\n\n';
    expect([...stacksOf(script)]).toEqual([['JS:*a node:net:1:1', 'Builtins_JSEntry'], ['clear_page_erms']]);
  });
});

describe("the profile's two runs of each target", () => {
  const run = (rps: number, serverCpuUs: number, gcUs: number, sources: Record<string, number>) => ({
    name: 'gateway check',
    rps,
    serverCpuUs,
    redisCpuUs: 1,
    samples: 100,
    groups: { gc: gcUs, ours: serverCpuUs - gcUs },
    sources: Object.entries(sources).map(([source, us]) => ({ source, us })),
  });

  it('averages the runs with equal weights (a steady drift cancels), keeping a source seen in one run only', () => {
    const combined = combine([run(300, 30, 2, { native: 20, 'v8:gc': 2 }), run(100, 50, 6, { native: 40, 'pkg:ioredis': 4 })]);
    expect(combined).toMatchObject({ name: 'gateway check', rps: 200, serverCpuUs: 40, redisCpuUs: 1, samples: 200 });
    expect(combined.groups).toEqual({ gc: 4, ours: 36 });
    expect(combined.sources).toEqual([
      { source: 'native', us: 30 },
      { source: 'pkg:ioredis', us: 2 },
      { source: 'v8:gc', us: 1 },
    ]);
  });
});
