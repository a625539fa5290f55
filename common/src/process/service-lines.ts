/** pino's numeric levels, as `npm start` shows them. */
const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

interface LogLine {
  level?: unknown;
  msg?: unknown;
  req?: { method?: unknown; url?: unknown };
  res?: { statusCode?: unknown };
  responseTime?: unknown;
  err?: { type?: unknown; message?: unknown };
}

function parsed(line: string): LogLine | null {
  if (!line.startsWith('{')) return null;
  try {
    const value: unknown = JSON.parse(line);
    return value && typeof value === 'object' && typeof (value as LogLine).level === 'number'
      ? (value as LogLine)
      : null;
  } catch {
    return null;
  }
}

/**
 * One line of a service's output as `npm start` prints it, for a person at a terminal: every line names its
 * process (`[admin] ...`, as `npm start`'s own lines are `[start] ...`), and a JSON log line is shown as its
 * level, message, request (method, URL, status, time) and error. Run alone (`npm run admin`, a deployment), the
 * services write the JSON lines themselves, for machines.
 */
export function serviceLine(name: string, line: string): string {
  const log = parsed(line);
  if (!log) return `[${name}] ${line}`;
  const parts = [LEVELS[log.level as number] ?? String(log.level)];
  if (typeof log.msg === 'string') parts.push(log.msg);
  if (log.req && typeof log.req.method === 'string') {
    parts.push(`${log.req.method} ${String(log.req.url)}`);
    if (log.res && typeof log.res.statusCode === 'number') parts.push(String(log.res.statusCode));
    if (typeof log.responseTime === 'number') parts.push(`${log.responseTime.toFixed(1)} ms`);
  }
  if (log.err && typeof log.err.message === 'string') {
    parts.push(`(${typeof log.err.type === 'string' ? `${log.err.type}: ` : ''}${log.err.message})`);
  }
  return `[${name}] ${parts.join(' ')}`;
}
