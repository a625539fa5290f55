import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { validationError } from '@ent/common/errors/app-error';
import {
  AUDIT_PATH_VALUE_NAMES,
  AuditEventListSchema,
  ListAuditEventsQuery,
  type AuditOutcomeName,
} from '@ent/contract/audit';
import { commonErrorResponses } from '@ent/contract/common';
import { rfc3339ToMs, toAuditEventBody } from './entry.ts';
import { listAuditEvents } from './service.ts';

/** `params[key]=x&params[subscriber_id]=y` (keys arrive literally from the query string parser) as `{key, subscriber_id}`. */
function paramFilters(query: ListAuditEventsQuery): Record<string, string> {
  const filters: Array<[string, string]> = [];
  for (const name of AUDIT_PATH_VALUE_NAMES) {
    const value = query[`params[${name}]`];
    if (value !== undefined) filters.push([name, value]);
  }
  return Object.fromEntries(filters);
}

/** The schema's format already refuses what Date.parse cannot read; this keeps a NaN out of the query regardless. */
function timeFilter(value: string | undefined, field: string): number | undefined {
  if (!value) return undefined;
  const ms = rfc3339ToMs(value);
  if (!Number.isFinite(ms))
    throw validationError(`${field} is not a time this service can represent.`, { field, value });
  return ms;
}

export async function auditRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get(
    '/org/audit-events',
    {
      config: { scope: 'org:audit:read', adminOnly: true },
      schema: {
        tags: ['audit'],
        querystring: ListAuditEventsQuery,
        response: { 200: AuditEventListSchema, ...commonErrorResponses },
      },
    },
    async (request) => {
      const organizationId = request.principal!.organizationId;
      const query = request.query;
      const occurredAfter = timeFilter(query.occurred_after, 'occurred_after');
      const occurredBefore = timeFilter(query.occurred_before, 'occurred_before');
      const page = await listAuditEvents(app.db, organizationId, {
        limit: query.limit,
        startingAfter: query.starting_after,
        actorMemberId: query.actor_member_id,
        outcome: query.outcome as AuditOutcomeName | undefined,
        method: query.method,
        route: query.route,
        params: paramFilters(query),
        service: query.service,
        requestId: query.request_id,
        occurredAfter,
        occurredBefore,
      });
      return { audit_events: page.items.map(toAuditEventBody), has_more: page.hasMore };
    },
  );
}
