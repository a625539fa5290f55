import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { MAX_IMPORT_BYTES } from '@ent/contract/imports';
import { createDb } from '@ent/common/db/connect';
import type { Database } from '@ent/common/db/database';
import { createImportRunner, type ImportRunner, type ImportRunnerOptions } from './runner.ts';

export interface ImportsOptions {
  runner?: Partial<ImportRunnerOptions>;
  /** The largest body (MAX_IMPORT_BYTES; tests lower it). */
  maxBytes?: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    imports: { runner: ImportRunner; maxBytes: number; stagingDb: Kysely<Database> };
  }
}

/**
 * How long one staging insert (5,000 lines) may run. An upload is one long request already exempt from the request
 * deadline, and a stall of one insert past the ordinary 10 s statement timeout (a busy disk) failed the whole upload
 * with 503 (seen once in the import bench): its inserts get a pool of their own with a longer timeout.
 */
const STAGING_STATEMENT_TIMEOUT_MS = 60_000;

/**
 * The import runner of this admin process: it applies the imports this process received and, at start and then
 * every lease period, takes over those whose process died (their lease expired).
 */
export const importsRunner = fp(
  async function importsRunner(app: FastifyInstance, options: ImportsOptions) {
    const runner = createImportRunner(
      {
        db: app.db,
        publisher: app.snapshots,
        redis: app.redis,
        redisKeys: app.redisKeys,
        catalogLimits: app.config.catalogLimits,
        log: { warn: (m) => app.log.warn(m), error: (m) => app.log.error(m) },
      },
      { leaseMs: app.config.imports.leaseMs, batchSize: app.config.imports.batchSize, ...options.runner },
    );
    // Connections are made as uploads need them (one staging insert in flight each), up to the app pool's 10: a
    // wait for one is bounded by the ordinary 3 s connection timeout, and a 503 again past it.
    const stagingDb = createDb(app.config.databaseUrl, {
      max: 10,
      statementTimeoutMillis: STAGING_STATEMENT_TIMEOUT_MS,
    });
    app.decorate('imports', { runner, maxBytes: options.maxBytes ?? MAX_IMPORT_BYTES, stagingDb });
    let sweep: NodeJS.Timeout | null = null;
    const resume = () =>
      runner
        .resumeAbandoned()
        .catch((error: unknown) => app.log.warn({ err: error }, 'import resume sweep failed'));
    app.addHook('onReady', async () => {
      await resume();
      sweep = setInterval(resume, runner.leaseMs);
      sweep.unref();
    });
    app.addHook('onClose', async () => {
      if (sweep) clearInterval(sweep);
      await runner.stop();
      await stagingDb.destroy();
    });
  },
  { name: 'imports-runner', dependencies: ['infrastructure', 'snapshots'] },
);
