/**
 * The one line entctl prints for a failure. fetch's own "fetch failed" says nothing of where or why: its cause does
 * (connect ECONNREFUSED 127.0.0.1:3001), so it is added. A host name with several addresses (localhost: ::1 and
 * 127.0.0.1) fails with an AggregateError whose own message is empty: its first error speaks for it.
 */
export function errorLine(error: unknown): string {
  let message = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error ? causeOf(error.cause) : '';
  if (cause && !message.includes(cause)) message = `${message}: ${cause}`;
  return `entctl: ${message}\n`;
}

function causeOf(cause: unknown): string {
  if (!(cause instanceof Error)) return '';
  if (cause.message) return cause.message;
  if (cause instanceof AggregateError && cause.errors[0] instanceof Error) return cause.errors[0].message;
  return (cause as { code?: string }).code ?? '';
}
