import { api } from './client.ts';
import type { UsageHistory, UsageRecord } from './types.ts';

export const usageApi = {
  current: () => api.get<UsageRecord>('/org/usage/current'),
  /** The last `months` UTC months (at most 24), the current one merged with the live count. */
  history: (months: number) => api.get<UsageHistory>('/org/usage/history', { months }),
};
