import type { FastifyBaseLogger } from 'fastify';
import type { OutboxRelay } from './relay.ts';

export interface RelayFollowUpOptions {
  /** The first pass's delay after a write-through that did not deliver (ms). */
  firstMs: number;
  /** Passes back off, doubling, up to this (ms). */
  maxMs: number;
}

export const defaultRelayFollowUp: RelayFollowUpOptions = { firstMs: 500, maxMs: 5000 };

/**
 * Admin's own relay passes after a write-through that did not deliver (Redis unreachable, or hung past its command
 * timeout, at the commit). The worker's relay is the guarantee, but a committed change, a revocation above all
 * (DESIGN.md §2.9), must not wait for a worker that is not running: a key revoked while Redis is paused and the
 * worker down would keep answering on every gateway until the worker started. Passes
 * back off while the outbox holds undone entries and stop once it holds none; nothing runs while all is delivered.
 */
export function createRelayFollowUp(
  deps: {
    relay: Pick<OutboxRelay, 'drainOnce'>;
    undone: () => Promise<number>;
    redisReady: () => boolean;
    log: Pick<FastifyBaseLogger, 'warn'>;
  },
  options: RelayFollowUpOptions = defaultRelayFollowUp,
) {
  let timer: NodeJS.Timeout | null = null;
  let delayMs = options.firstMs;
  let closed = false;

  async function pass(): Promise<void> {
    timer = null;
    try {
      if (deps.redisReady()) await deps.relay.drainOnce();
      if ((await deps.undone()) === 0) {
        delayMs = options.firstMs;
        return;
      }
    } catch (error) {
      deps.log.warn({ err: error }, 'outbox relay pass in admin failed; retrying');
    }
    delayMs = Math.min(options.maxMs, delayMs * 2);
    arm(delayMs);
  }

  function arm(afterMs: number): void {
    if (closed || timer) return;
    timer = setTimeout(() => void pass(), afterMs);
    timer.unref();
  }

  return {
    /** Something committed may be undelivered: a pass soon (`afterMs`, default the first delay), then more while needed. */
    schedule(afterMs: number = options.firstMs): void {
      arm(afterMs);
    },
    close(): void {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = null;
    },
  };
}
