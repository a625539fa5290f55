import { systemClock } from '@ent/common/clock';
import { loadConfig } from '@ent/common/config';
import { exitWithParent, parentToFollow } from '@ent/common/process/exit-with-parent';
import { createDb } from '@ent/common/db/connect';
import { createRedis } from '@ent/common/redis/connect';
import { jobDefinitions } from './jobs/processors.ts';
import { closeQueues, createQueues } from './jobs/queues.ts';
import { startWorkers } from './jobs/start-workers.ts';

const config = loadConfig();
const parentPid = parentToFollow();
if (parentPid) exitWithParent(parentPid);
const db = createDb(config.databaseUrl);
const redis = createRedis(config);
const queues = createQueues(config);
const stop = await startWorkers({ config, clock: systemClock, db, redis, queues });
process.stdout.write(`[worker] running ${jobDefinitions.length} job kinds\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (async () => {
      await stop();
      await closeQueues(queues);
      await db.destroy();
      redis.disconnect();
      process.exit(0);
    })();
  });
}
