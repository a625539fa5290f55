import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isSafeMethod } from '@ent/common/http/session-request';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A POST that reads (an eval: it changes nothing but the metered count), ordered like a GET on its connection. */
    evaluation?: boolean;
  }
}

/** One connection's requests in flight, and those waiting their turn (in arrival order). */
interface Pipeline {
  inFlight: number;
  writesInFlight: number;
  waiting: { write: boolean; start: () => void }[];
}

const PIPELINE = Symbol('pipeline');
const IS_WRITE = Symbol('isWrite');
const ADMITTED_TO = Symbol('admittedTo');
type PipelinedSocket = Socket & { [PIPELINE]?: Pipeline };
/**
 * The pipeline a request was admitted to is kept on the request: by the time it is answered, its message may no longer
 * name its socket (a body passed on as a stream to admin, read to its end there).
 */
type OrderedRequest = FastifyRequest & { [IS_WRITE]?: boolean; [ADMITTED_TO]?: Pipeline };

const isWrite = (request: FastifyRequest): boolean =>
  !isSafeMethod(request.method) && request.routeOptions.config.evaluation !== true;

function admit(pipeline: Pipeline, write: boolean): void {
  pipeline.inFlight += 1;
  if (write) pipeline.writesInFlight += 1;
}

const mayStart = (pipeline: Pipeline, write: boolean): boolean =>
  write ? pipeline.inFlight === 0 : pipeline.writesInFlight === 0;

/**
 * Requests pipelined on one connection run in its order where it matters (RFC 9112 §9.3.2: only safe methods may
 * be processed in parallel): a write starts once every earlier request on the connection has been answered, and
 * any request once every earlier write has. Each forwarded request takes its own connection to admin, so without
 * this three pipelined PATCHes could apply in any order and a GET after them could read the value before them.
 * A connection that does not pipeline (nearly all) pays one check on its socket per request.
 */
export const pipelineOrder = fp(
  async function pipelineOrder(app: FastifyInstance) {
    // Declared up front, so every request object keeps one shape (a property added per request would not).
    app.decorateRequest(IS_WRITE, undefined);
    app.decorateRequest(ADMITTED_TO, undefined);
    app.addHook('onRequest', (request: OrderedRequest, _reply, done) => {
      const socket = request.raw.socket as PipelinedSocket | null;
      if (!socket) return done();
      const write = isWrite(request);
      request[IS_WRITE] = write;
      let pipeline = socket[PIPELINE];
      if (pipeline === undefined) {
        pipeline = { inFlight: 0, writesInFlight: 0, waiting: [] };
        socket[PIPELINE] = pipeline;
      }
      request[ADMITTED_TO] = pipeline;
      if (pipeline.waiting.length === 0 && mayStart(pipeline, write)) {
        admit(pipeline, write);
        done();
        return;
      }
      // Only a request that must wait pays for a closure.
      const waiting = pipeline;
      waiting.waiting.push({
        write,
        start: () => {
          admit(waiting, write);
          done();
        },
      });
    });

    app.addHook('onResponse', (request: OrderedRequest, _reply, done) => {
      const pipeline = request[ADMITTED_TO];
      if (pipeline !== undefined && request[IS_WRITE] !== undefined) {
        pipeline.inFlight -= 1;
        if (request[IS_WRITE]) pipeline.writesInFlight -= 1;
        while (pipeline.waiting.length > 0 && mayStart(pipeline, pipeline.waiting[0]!.write)) {
          pipeline.waiting.shift()!.start();
        }
      }
      done();
    });
  },
  { name: 'pipeline-order' },
);
