export type ProbeResult = 'ok' | 'unreachable';

/**
 * `work`, or a rejection once `ms` have passed: a stuck dependency then gets its answer (a 503, "unreachable") at
 * once, while the call itself runs on to its own timeout (its late failure is nobody's to handle).
 */
export function settledWithin<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  work.catch(() => {});
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}

/**
 * One dependency check of a readiness probe: 'ok' when `check` resolves within `timeoutMs`, else 'unreachable'.
 * A hung dependency must not hang the probe: balancers give up after about a second and count a timeout as
 * a failure, which would hide the body that says which dependency is missing.
 */
export function probe(check: () => Promise<unknown>, timeoutMs: number): Promise<ProbeResult> {
  return settledWithin(check(), timeoutMs).then(
    (): ProbeResult => 'ok',
    (): ProbeResult => 'unreachable',
  );
}
