import { systemClock } from '@ent/common/clock';
import { loadConfig } from '@ent/common/config';
import { assertSecretsKeyringUsable } from '@ent/common/crypto/keyring';
import { processLogger } from '@ent/common/http/logging';
import { followStarter } from '@ent/common/process/exit-with-parent';
import { installGracefulShutdown } from '@ent/common/process/graceful-shutdown';
import { createDb } from '@ent/common/db/connect';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { startMeteredPersister } from './features/metered-usage/persister.ts';
import { startOutboxRunner } from './features/outbox/runner.ts';
import { createImportRunner } from './features/imports/runner.ts';
import { createSnapshotPublisher } from './features/snapshots/publisher.ts';
import { jobDefinitions, queueNames } from './job-registry.ts';
import { closeQueues, createQueues } from './jobs/queues.ts';
import { startWorkers } from './jobs/start-workers.ts';

const config = loadConfig();
assertSecretsKeyringUsable(config.secretsKey);
followStarter('worker');
const db = createDb(config.databaseUrl);
const redis = createRedis(config);
const queues = createQueues(config, queueNames);
const logger = processLogger(config.logLevel);
const log = {
  info: (message: string) => logger.info(message),
  warn: (message: string) => logger.warn(message),
  error: (message: string) => logger.error(message),
};
const keys = redisKeys(config.redisKeyPrefix);
const outbox = startOutboxRunner({ db, redis, redisKeys: keys, log });
const meteredPersister = startMeteredPersister({
  db,
  redis,
  redisKeys: keys,
  clock: systemClock,
  queues,
  log,
});
// Imports whose admin died mid-way are resumed here too (their lease expired), so an import finishes even when
// no admin restarts.
const imports = createImportRunner(
  {
    db,
    publisher: createSnapshotPublisher({ db, redis, redisKeys: keys }),
    redis,
    redisKeys: keys,
    catalogLimits: config.catalogLimits,
    log,
  },
  { leaseMs: config.imports.leaseMs, batchSize: config.imports.batchSize },
);
const resumeImports = () =>
  imports
    .resumeAbandoned()
    .catch((error: unknown) => log.warn(`import resume sweep: ${(error as Error).message}`));
void resumeImports();
const importSweep = setInterval(resumeImports, config.imports.leaseMs);
const stopWorkers = await startWorkers({ config, clock: systemClock, db, redis, queues }, jobDefinitions);
// The worker answers no health probe: this line is how whoever started it knows it runs, so it is written at any
// LOG_LEVEL.
logger
  .child({}, { level: 'info' })
  .info(`running ${jobDefinitions.length} job kinds and the outbox relay, and the metered usage persister`);

installGracefulShutdown({
  drainDelayMs: 0,
  timeoutMs: config.shutdownTimeoutMs,
  close: async () => {
    clearInterval(importSweep);
    await imports.stop();
    await outbox.stop();
    await meteredPersister.stop();
    await stopWorkers();
    await closeQueues(queues);
    await db.destroy();
    redis.disconnect();
  },
  log,
});
