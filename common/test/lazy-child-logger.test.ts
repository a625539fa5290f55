import { Writable } from 'node:stream';
import Fastify, { LogController } from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazyRequestLoggers } from '../src/http/lazy-child-logger.ts';

function appLogging(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const app = Fastify({
    ...lazyRequestLoggers({ level, stream }),
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => 'req_test',
  });
  return { app, lines };
}

describe('lazy request logger', () => {
  it('logs enabled levels with the request id bound, like a pino child', async () => {
    const { app, lines } = appLogging('warn');
    app.get('/', async (request) => {
      request.log.warn({ detail: 1 }, 'careful');
      request.log.error('broken %s', 'badly');
      return { ok: true };
    });
    expect((await app.inject({ method: 'GET', url: '/' })).statusCode).toBe(200);
    expect(lines).toMatchObject([
      { level: 40, reqId: 'req_test', detail: 1, msg: 'careful' },
      { level: 50, reqId: 'req_test', msg: 'broken badly' },
    ]);
  });

  it('drops levels below the logger level and reports the level', async () => {
    const { app, lines } = appLogging('warn');
    let level = '';
    app.get('/', async (request) => {
      request.log.info('not shown');
      request.log.debug('not shown either');
      level = request.log.level;
      return { ok: true };
    });
    await app.inject({ method: 'GET', url: '/' });
    expect(lines).toEqual([]);
    expect(level).toBe('warn');
  });

  it('honours a route-level log level and makes real children', async () => {
    const { app, lines } = appLogging('warn');
    app.get('/', { logLevel: 'info' }, async (request) => {
      request.log.info('route info');
      request.log.child({ part: 'inner' }).warn('from a child');
      return { ok: true };
    });
    await app.inject({ method: 'GET', url: '/' });
    expect(lines).toMatchObject([
      { level: 30, reqId: 'req_test', msg: 'route info' },
      { level: 40, reqId: 'req_test', part: 'inner', msg: 'from a child' },
    ]);
  });

  it("serializes errors with Fastify's serializers, and logs at the application level too", async () => {
    const { app, lines } = appLogging('warn');
    app.get('/', async (request) => {
      request.log.warn({ err: new Error('gate failed') }, 'answering from the LRU');
      return { ok: true };
    });
    await app.ready();
    app.log.error('application level');
    await app.inject({ method: 'GET', url: '/' });
    expect(lines).toMatchObject([
      { level: 50, msg: 'application level' },
      { level: 40, reqId: 'req_test', err: { type: 'Error', message: 'gate failed' }, msg: 'answering from the LRU' },
    ]);
    expect(lines[0]).not.toHaveProperty('reqId');
    expect(String((lines[1]!.err as { stack: string }).stack)).toContain('gate failed');
  });

  it('is silent, with no request logger made, when logging is off', async () => {
    const app = Fastify({ ...lazyRequestLoggers(false), genReqId: () => 'req_test' });
    let sameAsApplication = false;
    app.get('/', async (request) => {
      request.log.error('dropped');
      sameAsApplication = request.log === app.log;
      return { ok: true };
    });
    expect((await app.inject({ method: 'GET', url: '/' })).statusCode).toBe(200);
    expect(sameAsApplication).toBe(true);
  });
});
