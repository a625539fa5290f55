import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../src/auth/api-key.ts';
import { generateSessionToken } from '../src/auth/session-token.ts';
import { errorHandling } from '../src/http/error-handler.ts';
import { lazyRequestLoggers } from '../src/http/lazy-child-logger.ts';
import { fastifyLoggerOptions, redactSecrets } from '../src/http/logging.ts';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, stream };
}

const apiKey = generateApiKey().plaintext;
const session = generateSessionToken().token;
const webhookSecret = 'whsec_MfKQ9r8GKYqXTwJg4e6CTMGkbvD2eRo0V7bNr5zgXWc=';
const inviteToken = 'Zq3xV9sKpL0mN2bC4dF6gH8jK1lQ3wE5rT7yU9iO0pA';

/** An error as a library might raise it, quoting what it was given. */
const leakyError = () =>
  Object.assign(
    new Error(`upstream refused ${apiKey} with ${webhookSecret} for /console/join/${inviteToken}`),
    {
      headers: { cookie: `ent_session=${session}`, 'x-api-key': apiKey },
    },
  );

describe('log redaction', () => {
  it('scrubs every kind of secret from text and keeps what identifies it', () => {
    expect(redactSecrets(`key ${apiKey} cookie ent_session=${session} secret ${webhookSecret}`)).toBe(
      'key svc-mk-1-[redacted] cookie ent_session=ses_[redacted] secret whsec_[redacted]',
    );
    expect(redactSecrets(`GET /console/join/${inviteToken}?x=1`)).toBe('GET /console/join/[redacted]?x=1');
    expect(redactSecrets(`/console/api/invites/${inviteToken}/accept`)).toBe(
      '/console/api/invites/[redacted]/accept',
    );
    expect(redactSecrets('/org/invites/inv_01HZX and /org/features/sso')).toBe(
      '/org/invites/inv_01HZX and /org/features/sso',
    );
  });

  it("admin's 500 error log carries none of the secrets its error quotes", async () => {
    const { lines, stream } = capture();
    const app = Fastify({ logger: fastifyLoggerOptions({ level: 'info', stream }) });
    await app.register(errorHandling);
    app.get('/boom', async () => {
      throw leakyError();
    });
    expect((await app.inject({ method: 'GET', url: '/boom' })).statusCode).toBe(500);
    const text = lines.join('');
    expect(text).toContain('request failed');
    for (const secret of [apiKey, session, webhookSecret, inviteToken]) expect(text).not.toContain(secret);
  });

  it("the gateway's lazy request loggers redact the same way", async () => {
    const { lines, stream } = capture();
    const app = Fastify({ ...lazyRequestLoggers({ level: 'info', stream }) });
    await app.register(errorHandling);
    app.get('/boom', async (request) => {
      request.log.warn({ err: leakyError(), headers: request.headers }, 'admin unreachable');
      return { ok: true };
    });
    await app.inject({ method: 'GET', url: '/boom', headers: { authorization: `Bearer ${apiKey}` } });
    const text = lines.join('');
    expect(text).toContain('admin unreachable');
    for (const secret of [apiKey, session, webhookSecret, inviteToken]) expect(text).not.toContain(secret);
  });
});
