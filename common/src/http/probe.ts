export type ProbeResult = 'ok' | 'unreachable';

/**
 * One dependency check of a readiness probe: 'ok' when `check` resolves within `timeoutMs`, else 'unreachable'.
 * A hung dependency must not hang the probe: balancers give up after about a second and count a timeout as
 * a failure, which would hide the body that says which dependency is missing.
 */
export async function probe(check: () => Promise<unknown>, timeoutMs: number): Promise<ProbeResult> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<ProbeResult>((resolve) => {
    timer = setTimeout(() => resolve('unreachable'), timeoutMs);
  });
  const checked = check().then(
    (): ProbeResult => 'ok',
    (): ProbeResult => 'unreachable',
  );
  try {
    return await Promise.race([checked, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
