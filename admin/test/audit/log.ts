import pg from 'pg';
import { expect } from 'vitest';
import { keyPrefixOf } from '@ent/common/auth/api-key';
import type { AdminTestContext, TestOrganization } from '../../../test-support/admin-context.ts';
import { auditEntryIds } from '../../src/features/audit/entry.ts';

/** An entry as GET /org/audit-events answers it. */
export interface AuditEvent {
  id: string;
  occurred_at: string;
  request_id: string;
  organization_id: string;
  actor: { member_id: string; auth_type: string; key_prefix: string };
  service: string;
  method: string;
  route: string;
  params: Record<string, string>;
  ip: string;
  user_agent: string | null;
  outcome: string;
  status: number | null;
  details: Record<string, unknown> | null;
}

/**
 * Calls as an organization and reads its audit log back. `current` is read at each call, so a file can build the
 * helpers at load time and fill its context in `beforeAll`.
 */
export function auditLog(current: () => { ctx: AdminTestContext; org: TestOrganization }) {
  const inject = (
    method: 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'GET',
    url: string,
    payload?: object,
    headers = current().org.headers,
  ) =>
    current().ctx.app.inject({
      method,
      url,
      headers: { 'user-agent': 'audit-test/1.0', ...headers },
      payload,
    });

  async function list(
    query = '',
    headers = current().org.headers,
  ): Promise<{ audit_events: AuditEvent[]; has_more: boolean }> {
    const res = await current().ctx.app.inject({ method: 'GET', url: `/org/audit-events${query}`, headers });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  async function entryFor(requestId: string): Promise<AuditEvent> {
    const body = await list(`?request_id=${requestId}`);
    expect(body.audit_events).toHaveLength(1);
    return body.audit_events[0]!;
  }

  async function countRows(): Promise<{ events: number; outcomes: number }> {
    const { ownerDb } = current().ctx;
    const events = await ownerDb
      .selectFrom('audit_events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const outcomes = await ownerDb
      .selectFrom('audit_outcomes')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return { events: Number(events.n), outcomes: Number(outcomes.n) };
  }

  /** Runs `work` while another session holds `table` in ACCESS EXCLUSIVE mode (every query on it waits). */
  async function whileLocked(table: string, work: () => Promise<void>): Promise<void> {
    const locker = new pg.Client({ connectionString: current().ctx.database.ownerUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      await work();
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
  }

  let keys = 0;
  /** A feature key no other case uses, so each case makes the features it writes. */
  const uniqueKey = (base: string) => `${base}-${++keys}`;
  const createFeature = async (key: string, name: string) =>
    expect((await inject('POST', '/org/features', { key, name, kind: 'flag' })).statusCode).toBe(201);

  return { inject, list, entryFor, countRows, whileLocked, uniqueKey, createFeature };
}

/** Writes the entry of a write that never answered (no outcome yet), as if it began at `occurredAtMs`; answers its id. */
export async function insertPendingEntry(
  db: AdminTestContext['db'],
  org: TestOrganization,
  occurredAtMs: number,
): Promise<string> {
  const { id, occurredAt } = auditEntryIds()(occurredAtMs);
  await db
    .insertInto('audit_events')
    .values({
      id,
      organization_id: org.organization_id,
      occurred_at: occurredAt,
      request_id: 'req_01kpendingpendingpendingpe',
      actor_member_id: org.member_id,
      actor_auth_type: 'member_apikey',
      actor_key_prefix: keyPrefixOf(org.api_key),
      service: 'api',
      method: 'POST',
      route: '/org/features',
      params: '{}',
      ip: '127.0.0.1',
      user_agent: null,
    })
    .execute();
  return id;
}
