import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { generatedSource } from '../scripts/generated-source.ts';

describe('generated API types', () => {
  it('match what the live /openapi.json generates now (run `npm run sdk:generate` when this fails)', async () => {
    const committed = await readFile(new URL('../src/generated/api.ts', import.meta.url), 'utf8');
    const regenerated = await generatedSource();
    expect(regenerated.length).toBeGreaterThan(10_000);
    expect(
      committed === regenerated,
      'sdk/src/generated/api.ts is out of date: run `npm run sdk:generate`',
    ).toBe(true);
  }, 60_000);
});
