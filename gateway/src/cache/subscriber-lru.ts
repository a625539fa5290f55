import { LRUCache } from 'lru-cache';
import type { SubscriberEntry } from './entries.ts';

/** A hit moves its entry to the recent end of the LRU at most this often: eviction order is kept to the second. */
const TOUCH_EVERY_MS = 1000;

interface Slot {
  readonly organizationId: string;
  readonly subscriberId: string;
  /** The LRU's key, kept so that a touch hashes nothing new. */
  readonly key: string;
  readonly entry: SubscriberEntry;
  touchedAtMs: number;
}

/**
 * The gateway's subscriber entries. lru-cache holds them, bounds them by estimated bytes and chooses what to evict;
 * an index by organization and then subscriber id answers the lookups. Looking up the LRU itself would take a key
 * made per eval (organization and subscriber joined): a fresh string to flatten and hash before probing a map of
 * every cached subscriber, measured at several times the cost of the two lookups here, whose organization id is a
 * string the principal holds (hash already known) and whose subscriber id is short. The index follows the LRU
 * through its dispose callback, which lru-cache calls for every value it drops (evicted, deleted or replaced).
 */
export class SubscriberLru {
  readonly #lru: LRUCache<string, Slot>;
  readonly #byOrganization = new Map<string, Map<string, Slot>>();

  constructor(maxBytes: number) {
    this.#lru = new LRUCache<string, Slot>({
      maxSize: maxBytes,
      sizeCalculation: (slot, key) => slot.entry.bytes(key.length),
      dispose: (slot) => this.#unindex(slot),
    });
  }

  /** The entry, made the most recently used (to the second). */
  get(organizationId: string, subscriberId: string, nowMs: number): SubscriberEntry | undefined {
    const slot = this.#byOrganization.get(organizationId)?.get(subscriberId);
    if (slot === undefined) return undefined;
    if (nowMs - slot.touchedAtMs >= TOUCH_EVERY_MS) {
      slot.touchedAtMs = nowMs;
      this.#lru.get(slot.key);
    }
    return slot.entry;
  }

  /** The entry, leaving the eviction order alone. */
  peek(organizationId: string, subscriberId: string): SubscriberEntry | undefined {
    return this.#byOrganization.get(organizationId)?.get(subscriberId)?.entry;
  }

  set(organizationId: string, subscriberId: string, entry: SubscriberEntry, nowMs: number): void {
    const key = `${organizationId}\n${subscriberId}`;
    const slot: Slot = { organizationId, subscriberId, key, entry, touchedAtMs: nowMs };
    this.#lru.set(key, slot);
    // An entry larger than the whole budget is refused by the LRU: then it is not indexed either.
    if (this.#lru.peek(key) !== slot) return;
    let subscribers = this.#byOrganization.get(organizationId);
    if (subscribers === undefined) {
      subscribers = new Map();
      this.#byOrganization.set(organizationId, subscribers);
    }
    subscribers.set(subscriberId, slot);
  }

  delete(organizationId: string, subscriberId: string): void {
    this.#lru.delete(`${organizationId}\n${subscriberId}`);
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
