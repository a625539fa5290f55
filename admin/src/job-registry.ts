import type { AnyJobDefinition } from './jobs/job.ts';
import type { QueueName } from './jobs/queues.ts';
import { auditSettleJob } from './features/audit/settle.job.ts';
import { webhookDeliveryJob } from './features/webhook/delivery.job.ts';
import { usageHistoryJob } from './features/usage/history.job.ts';
import { sessionCleanupJob } from './features/console-sessions/cleanup.job.ts';
import { webhookSweepJob } from './features/webhook/sweep.job.ts';
import { creditExpiryJob } from './features/credits/expiry.job.ts';

/**
 * Every job the worker runs, each defined beside its feature (`features/<family>/<name>.job.ts`, its queue's payload
 * declared there too). One line per job file.
 */
export const jobDefinitions: AnyJobDefinition[] = [
  auditSettleJob,
  webhookDeliveryJob,
  webhookSweepJob,
  usageHistoryJob,
  sessionCleanupJob,
  creditExpiryJob,
];

/** The queues of those jobs: the worker consumes them, admin produces into them. */
export const queueNames: QueueName[] = jobDefinitions.map((definition) => definition.queue);
