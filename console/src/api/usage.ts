import { api } from './client.ts';
import type { UsageRecord } from './types.ts';

export const usageApi = {
  current: () => api.get<UsageRecord>('/org/usage/current'),
};
