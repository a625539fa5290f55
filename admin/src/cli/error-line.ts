/**
 * The one line entctl prints for a failure. fetch's own "fetch failed" says nothing of where or why: its cause does
 * (connect ECONNREFUSED 127.0.0.1:3001), so it is added.
 */
export function errorLine(error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : '';
  if (cause && !message.includes(cause)) message = `${message}: ${cause}`;
  return `entctl: ${message}\n`;
}
