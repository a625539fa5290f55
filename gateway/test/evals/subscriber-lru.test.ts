import { describe, expect, it } from 'vitest';
import type { SubscriberDoc } from '@ent/common/snapshots/documents';
import { CatalogEntry, SubscriberEntry } from '../../src/features/shared/entries.ts';
import { SubscriberLru } from '../../src/features/evals/subscriber-lru.ts';

const NOW = Date.UTC(2026, 10, 24, 12);
const catalog = new CatalogEntry(1, { features: { seats: 'limit' }, plans: {} });
const plain: SubscriberDoc = { exists: true, plans: [], overrides: {} };
const entry = (version = 1) => SubscriberEntry.of(catalog, version, plain, NOW, null);
/** What one entry of this shape costs the LRU, with its key (same-length ids throughout). */
const bytesOf = (subscriberId: string) => entry().bytes(subscriberId.length);

describe('SubscriberLru (subscriber entries bounded by bytes, looked up by organization and subscriber)', () => {
  it('keeps the same subscriber id of two organizations apart', () => {
    const lru = new SubscriberLru(1024 * 1024);
    const first = entry(1);
    const second = entry(2);
    lru.set('org_a', 'sub_1', first, NOW);
    lru.set('org_b', 'sub_1', second, NOW);
    expect(lru.get('org_a', 'sub_1', NOW)).toBe(first);
    expect(lru.get('org_b', 'sub_1', NOW)).toBe(second);
    expect(lru.peek('org_c', 'sub_1')).toBeUndefined();
    lru.delete('org_a', 'sub_1');
    expect(lru.get('org_a', 'sub_1', NOW)).toBeUndefined();
    expect(lru.get('org_b', 'sub_1', NOW)).toBe(second);
    expect(lru.size).toBe(1);
  });

  it('answers with the entry that replaced another, never with none', () => {
    const lru = new SubscriberLru(1024 * 1024);
    const old = entry(1);
    const replacement = entry(2);
    lru.set('org_a', 'sub_1', old, NOW);
    lru.set('org_a', 'sub_1', replacement, NOW);
    expect(lru.get('org_a', 'sub_1', NOW)).toBe(replacement);
    expect(lru.size).toBe(1);
    expect(lru.calculatedSize).toBe(bytesOf('sub_1'));
  });

  it('forgets what it evicts for bytes, least recently used first (recency kept to the second)', () => {
    const lru = new SubscriberLru(3 * bytesOf('sub_1'));
    for (const id of ['sub_1', 'sub_2', 'sub_3']) lru.set('org_a', id, entry(), NOW);
    // sub_1 is asked for a second later, so sub_2 is now the least recently used.
    expect(lru.get('org_a', 'sub_1', NOW + 1000)).toBeDefined();
    lru.set('org_a', 'sub_4', entry(), NOW + 1000);
    expect(lru.peek('org_a', 'sub_2')).toBeUndefined();
    expect(lru.peek('org_a', 'sub_1')).toBeDefined();
    expect(lru.peek('org_a', 'sub_3')).toBeDefined();
    expect(lru.peek('org_a', 'sub_4')).toBeDefined();
    expect(lru.size).toBe(3);
    expect(lru.calculatedSize).toBeLessThanOrEqual(3 * bytesOf('sub_1'));
  });

  it('indexes nothing the LRU refused (an entry over the whole budget)', () => {
    const lru = new SubscriberLru(bytesOf('sub_1') - 1);
    lru.set('org_a', 'sub_1', entry(), NOW);
    expect(lru.get('org_a', 'sub_1', NOW)).toBeUndefined();
    expect(lru.size).toBe(0);
  });
});
