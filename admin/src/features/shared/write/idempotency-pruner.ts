import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { Clock } from '@ent/common/clock';
import { PRUNE_BATCH, pruneExpiredKeys } from './idempotency-store.ts';

/** After a batch that was not full (nothing or little left to prune), the next prune waits this long. */
const PRUNE_IDLE_MS = 10_000;

export interface ExpiredKeyPruner {
  /** A keyed write was answered: prune a batch of expired keys unless one is in flight or none is due. */
  poke(): void;
  /** Resolves once no prune is in flight. */
  settled(): Promise<void>;
  /** Starts no more prunes and resolves once none is in flight (the app's close, before its pool ends). */
  close(): Promise<void>;
}

/**
 * Expired Idempotency-Keys are pruned after a keyed write's response has left, never on its latency path: one prune
 * in flight per process, again at the next keyed write while batches come back full (a backlog shrinks at the rate
 * of writes, as it grew), else at most once a PRUNE_IDLE_MS (a table with nothing expired costs one indexed lookup
 * every ten seconds of writes, not one per write).
 */
export function expiredKeyPruner(
  db: Kysely<Database>,
  clock: Clock,
  onError: (error: unknown) => void,
): ExpiredKeyPruner {
  let inFlight: Promise<void> | null = null;
  let nextDueAt = 0;
  let closed = false;
  return {
    poke() {
      const now = clock.now();
      if (closed || inFlight || now < nextDueAt) return;
      inFlight = pruneExpiredKeys(db, new Date(now))
        .then((pruned) => {
          nextDueAt = pruned < PRUNE_BATCH ? clock.now() + PRUNE_IDLE_MS : 0;
        })
        .catch((error: unknown) => {
          nextDueAt = clock.now() + PRUNE_IDLE_MS;
          onError(error);
        })
        .finally(() => {
          inFlight = null;
        });
    },
    async settled() {
      await inFlight;
    },
    async close() {
      closed = true;
      await inFlight;
    },
  };
}
