import { api, type Query } from './client.ts';
import type { AuditEvent, Page } from './types.ts';

export const auditApi = {
  list: (query: Query) => api.get<Page & { audit_events: AuditEvent[] }>('/org/audit-events', query),
};
