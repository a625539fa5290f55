import type { AnyJobDefinition } from './job.ts';
import { auditSettleJob } from '../features/audit/settle.job.ts';
import { webhookDeliveryJob } from '../features/webhook/delivery.job.ts';
import { usageHistoryJob } from '../features/usage/history.job.ts';
import { sessionCleanupJob } from '../features/console-sessions/cleanup.job.ts';
import { webhookSweepJob } from '../features/webhook/sweep.job.ts';

/** Every job the worker runs. One line per job file. */
export const jobDefinitions: AnyJobDefinition[] = [
  auditSettleJob,
  webhookDeliveryJob,
  webhookSweepJob,
  usageHistoryJob,
  sessionCleanupJob,
];
