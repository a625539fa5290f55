import { sleep } from './http.ts';

/** How long, after the load stopped, every invariant gets to hold before the scenario fails it. */
export const CONVERGENCE_BOUND_MS = 30_000;
const POLL_EVERY_MS = 250;

/**
 * Polls `probe` until it holds or the bound passes (bounded in attempts too). Returns when it first held,
 * or null. `giveUp` may end the wait early once more waiting cannot help (e.g. a count already too high and
 * steady).
 */
export async function converge(
  probe: () => Promise<boolean>,
  boundMs = CONVERGENCE_BOUND_MS,
  giveUp: () => boolean = () => false,
): Promise<number | null> {
  const deadline = Date.now() + boundMs;
  for (let attempt = 0; attempt < 1000; attempt++) {
    if (await probe().catch(() => false)) return Date.now();
    if (Date.now() >= deadline || giveUp()) return null;
    await sleep(POLL_EVERY_MS);
  }
  return null;
}
