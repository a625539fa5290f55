import { LRUCache } from 'lru-cache';
import type { SubscriberEntry } from '../shared/entries.ts';

/** A hit moves its entry to the recent end of the LRU at most this often: eviction order is kept to the second. */
const TOUCH_EVERY_MS = 1000;

interface Slot {
  readonly organizationId: string;
  readonly subscriberId: string;
  readonly entry: SubscriberEntry;
  touchedAtMs: number;
}

/**
 * The gateway's subscriber entries. lru-cache holds them, bounds them by estimated bytes and chooses what to evict;
 * an index by organization and then subscriber id answers the lookups. The LRU's keys are the index's slots
 * themselves (objects: hashed by identity), so no key is ever made from the two ids. A lookup by such a key, made
 * per eval, would flatten and hash a fresh string before probing a map of every cached subscriber: measured at
 * several times the cost of the two lookups here, whose organization id is a string the principal holds (its hash
 * known) and whose subscriber id is short. The index follows the LRU through its dispose callback, which
 * lru-cache calls for every slot it drops (evicted or deleted).
 */
export class SubscriberLru {
  readonly #lru: LRUCache<Slot, Slot>;
  readonly #byOrganization = new Map<string, Map<string, Slot>>();

  constructor(maxBytes: number) {
    this.#lru = new LRUCache<Slot, Slot>({
      maxSize: maxBytes,
      sizeCalculation: (slot) => slot.entry.bytes(slot.subscriberId.length),
      dispose: (slot) => this.#unindex(slot),
    });
  }

  /** The entry, made the most recently used (to the second). */
  get(organizationId: string, subscriberId: string, nowMs: number): SubscriberEntry | undefined {
    const slot = this.#byOrganization.get(organizationId)?.get(subscriberId);
    if (slot === undefined) return undefined;
    if (nowMs - slot.touchedAtMs >= TOUCH_EVERY_MS) {
      slot.touchedAtMs = nowMs;
      this.#lru.get(slot);
    }
    return slot.entry;
  }

  /** The entry, leaving the eviction order alone. */
  peek(organizationId: string, subscriberId: string): SubscriberEntry | undefined {
    return this.#byOrganization.get(organizationId)?.get(subscriberId)?.entry;
  }

  set(organizationId: string, subscriberId: string, entry: SubscriberEntry, nowMs: number): void {
    this.delete(organizationId, subscriberId);
    const slot: Slot = { organizationId, subscriberId, entry, touchedAtMs: nowMs };
    this.#lru.set(slot, slot);
    // An entry larger than the whole budget is refused by the LRU: then it is not indexed either.
    if (!this.#lru.has(slot)) return;
    let subscribers = this.#byOrganization.get(organizationId);
    if (subscribers === undefined) {
      subscribers = new Map();
      this.#byOrganization.set(organizationId, subscribers);
    }
    subscribers.set(subscriberId, slot);
  }

  delete(organizationId: string, subscriberId: string): void {
    const slot = this.#byOrganization.get(organizationId)?.get(subscriberId);
    if (slot !== undefined) this.#lru.delete(slot);
  }

  /** Cached subscribers. */
  get size(): number {
    return this.#lru.size;
  }

  /** Their estimated heap bytes, as bounded. */
  get calculatedSize(): number {
    return this.#lru.calculatedSize;
  }

  #unindex(slot: Slot): void {
    const subscribers = this.#byOrganization.get(slot.organizationId);
    if (subscribers?.get(slot.subscriberId) !== slot) return;
    subscribers.delete(slot.subscriberId);
    if (subscribers.size === 0) this.#byOrganization.delete(slot.organizationId);
  }
}
