import type { FastifyReply, FastifyRequest } from 'fastify';
import { LogController } from 'fastify';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

const REDACTED = '[redacted]';

/**
 * Every secret that can pass through a service, as it looks in text: whoever reads the logs must not be able to
 * use what they read. API keys and session tokens keep their public prefix (`svc-mk-1-`, `ses_`), webhook
 * secrets theirs (`whsec_`); an invite token is only recognisable by where it stands (a join link, the console's
 * invite routes), so the path segment after those is replaced whatever it holds.
 */
const SECRETS_IN_TEXT: readonly [RegExp, string][] = [
  [/svc-mk-1-[0-9A-Za-z]+/g, `svc-mk-1-${REDACTED}`],
  [/ses_[0-9A-Za-z]{8,}/g, `ses_${REDACTED}`],
  [/whsec_[A-Za-z0-9+/=_-]+/g, `whsec_${REDACTED}`],
  [/(\/join\/|\/console\/api\/invites\/)[^/?#\s"\\]+/g, `$1${REDACTED}`],
];

/** `text` with every secret of SECRETS_IN_TEXT replaced; the text itself when it holds none. */
export function redactSecrets(text: string): string {
  let redacted = text;
  for (const [pattern, replacement] of SECRETS_IN_TEXT) redacted = redacted.replace(pattern, replacement);
  return redacted;
}

/**
 * Headers that carry credentials, wherever a logged object holds them (pino's `redact`): a request serializer
 * or an error that includes headers must not write them out. The session cookie and the CSRF token derived from
 * it, an API key in either header, the gateways' internal token and the cookie a sign-in sets.
 */
const CREDENTIAL_HEADER_PATHS = [
  'cookie',
  'authorization',
  '["x-api-key"]',
  '["x-csrf-token"]',
  '["x-internal-token"]',
  '["set-cookie"]',
].flatMap((header) => {
  const at = header.startsWith('[') ? header : `.${header}`;
  return [`req.headers${at}`, `res.headers${at}`, `headers${at}`, `err.headers${at}`];
});

type LoggedRequest = Pick<FastifyRequest, 'method' | 'url' | 'host' | 'ip'> & {
  socket?: { remotePort?: number | undefined };
};

/**
 * The pino options every process logs with: credential headers censored, the request's URL logged without the
 * secrets paths can carry, and, last, every line written scrubbed of anything that looks like a secret (an
 * error's message or stack can quote one: a URL, a header, a value a library echoes).
 */
export function secretSafeLogging(): Pick<LoggerOptions, 'redact' | 'hooks' | 'serializers'> {
  return {
    redact: { paths: CREDENTIAL_HEADER_PATHS, censor: REDACTED },
    serializers: {
      req: (request: LoggedRequest) => ({
        method: request.method,
        url: redactSecrets(request.url),
        host: request.host,
        remoteAddress: request.ip,
        remotePort: request.socket?.remotePort,
      }),
    },
    hooks: { streamWrite: redactSecrets },
  };
}

export type LoggerSettings = false | { level: string; stream?: DestinationStream };

/**
 * Fastify's logger options from `LoggerSettings`: the level (and in tests a stream to read) with the secret-safe
 * options of every process.
 */
export function fastifyLoggerOptions(
  settings: LoggerSettings,
): false | (LoggerOptions & { stream?: DestinationStream }) {
  if (settings === false) return false;
  return { ...secretSafeLogging(), ...settings };
}

/** A logger for a process that serves no HTTP (the worker): JSON lines like admin's and the gateway's. */
export const processLogger = (level: string): Logger => pino({ ...secretSafeLogging(), level });

/**
 * Requests machines make all the time, logged at debug so they do not drown the others: the gateways' lookups on
 * `/internal/` (every cache miss and change) and the health probes of balancers and orchestrators.
 */
const isRoutineCall = (url: string): boolean =>
  url.startsWith('/internal/') || url === '/healthz' || url === '/readyz';

/**
 * One line per request, when it completes (Fastify's default is two, "incoming request" and "request completed"):
 * the method, the URL (secrets redacted by the `req` serializer), the status and the time taken; routine calls
 * at debug.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const line = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else if (isRoutineCall(request.url)) reply.log.debug(line, 'request completed');
    else reply.log.info(line, 'request completed');
  }
}
