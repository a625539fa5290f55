import type { Query } from '../../api/client.ts';

/** The audit route's filters (SPEC part 4, Audit log) as the form holds them; empty = not sent. */
export interface AuditFilters {
  actor_member_id: string;
  outcome: string;
  method: string;
  route: string;
  service: string;
  request_id: string;
  occurred_after: string;
  occurred_before: string;
  param_name: string;
  param_value: string;
}

export const NO_FILTERS: AuditFilters = {
  actor_member_id: '',
  outcome: '',
  method: '',
  route: '',
  service: '',
  request_id: '',
  occurred_after: '',
  occurred_before: '',
  param_name: '',
  param_value: '',
};

const instant = (local: string) => (local ? new Date(local).toISOString() : undefined);

export function queryOf(filters: AuditFilters): Query {
  const query: Query = {
    actor_member_id: filters.actor_member_id || undefined,
    outcome: filters.outcome || undefined,
    method: filters.method || undefined,
    route: filters.route.trim() || undefined,
    service: filters.service || undefined,
    request_id: filters.request_id.trim() || undefined,
    occurred_after: instant(filters.occurred_after),
    occurred_before: instant(filters.occurred_before),
  };
  if (filters.param_name.trim() && filters.param_value.trim()) {
    query[`params[${filters.param_name.trim()}]`] = filters.param_value.trim();
  }
  return query;
}
