import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { MAX_IMPORT_BYTES } from '@ent/contract/imports';
import { createImportRunner, type ImportRunner, type ImportRunnerOptions } from './runner.ts';

export interface ImportsOptions {
  runner?: Partial<ImportRunnerOptions>;
  /** The largest body (MAX_IMPORT_BYTES; tests lower it). */
  maxBytes?: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    imports: { runner: ImportRunner; maxBytes: number };
  }
}

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
    app.decorate('imports', { runner, maxBytes: options.maxBytes ?? MAX_IMPORT_BYTES });
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
    });
  },
  { name: 'imports-runner', dependencies: ['infrastructure', 'snapshots'] },
);
