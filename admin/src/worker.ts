import { systemClock } from '@ent/common/clock';
import { loadConfig } from '@ent/common/config';
import { assertSecretsKeyringUsable } from '@ent/common/crypto/keyring';
import { followStarter } from '@ent/common/process/exit-with-parent';
import { installGracefulShutdown } from '@ent/common/process/graceful-shutdown';
import { createDb } from '@ent/common/db/connect';
import { createRedis } from '@ent/common/redis/connect';
import { redisKeys } from '@ent/common/redis/keys';
import { startOutboxRunner } from './features/outbox/runner.ts';
import { jobDefinitions } from './jobs/registry.ts';
import { closeQueues, createQueues } from './jobs/queues.ts';
import { startWorkers } from './jobs/start-workers.ts';

const config = loadConfig();
assertSecretsKeyringUsable(config.secretsKey);
followStarter('worker');
const db = createDb(config.databaseUrl);
const redis = createRedis(config);
const queues = createQueues(config);
const log = {
  info: (message: string) => process.stdout.write(`[worker] ${message}\n`),
  warn: (message: string) => process.stderr.write(`[worker] ${message}\n`),
};
const outbox = startOutboxRunner({ db, redis, redisKeys: redisKeys(config.redisKeyPrefix), log });
const stopWorkers = await startWorkers({ config, clock: systemClock, db, redis, queues });
log.info(`running ${jobDefinitions.length} job kinds and the outbox relay`);

installGracefulShutdown({
  drainDelayMs: 0,
  timeoutMs: config.shutdownTimeoutMs,
  close: async () => {
    await outbox.stop();
    await stopWorkers();
    await closeQueues(queues);
    await db.destroy();
    redis.disconnect();
  },
  log: log.warn,
});
