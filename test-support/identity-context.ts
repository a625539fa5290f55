import type { Clock } from '@ent/common/clock';
import {
  createAdminContext,
  createTestOrganization,
  type AdminTestContext,
  type TestOrganization,
} from './admin-context.ts';

export interface CommittedWrite {
  method: string;
  route: string;
  details: Record<string, unknown> | null;
  authChanged: boolean;
  events: { type: string; data: Record<string, unknown> }[];
}

/** Records the outcome of each committed write (its details are what the audit log stores). */
function captureWrites(ctx: AdminTestContext): CommittedWrite[] {
  const writes: CommittedWrite[] = [];
  ctx.app.writePipeline.onCommitted(async (request, write) => {
    writes.push({
      method: request.method,
      route: request.routeOptions.url ?? '',
      details: write.details,
      authChanged: write.authChanged,
      events: [...write.events],
    });
  });
  return writes;
}

export const lastWrite = (writes: CommittedWrite[]): CommittedWrite => {
  const write = writes.at(-1);
  if (!write) throw new Error('no write was committed');
  return write;
};

export function caller(ctx: AdminTestContext, apiKey: string) {
  const headers = { 'x-api-key': apiKey };
  return {
    get: (url: string) => ctx.app.inject({ method: 'GET', url, headers }),
    post: (url: string, payload?: object) =>
      ctx.app.inject({ method: 'POST', url, headers, payload: payload ?? {} }),
    patch: (url: string, payload: object) => ctx.app.inject({ method: 'PATCH', url, headers, payload }),
    put: (url: string, payload: object) => ctx.app.inject({ method: 'PUT', url, headers, payload }),
    delete: (url: string) => ctx.app.inject({ method: 'DELETE', url, headers }),
  };
}

export interface IdentityTestContext {
  ctx: AdminTestContext;
  /** The organization under test, with a full-access admin key; `api` calls as it. */
  org: TestOrganization;
  /** A second organization, for tenant isolation. */
  other: TestOrganization;
  writes: CommittedWrite[];
  api: ReturnType<typeof caller>;
}

/** The setup every identity test file shares: its own database, two organizations, the write log. */
export async function identityTestContext(options: { clock?: Clock } = {}): Promise<IdentityTestContext> {
  const ctx = await createAdminContext(options);
  const writes = captureWrites(ctx);
  const org = await createTestOrganization(ctx.db, 'Acme');
  const other = await createTestOrganization(ctx.db, 'Other');
  return { ctx, org, other, writes, api: caller(ctx, org.api_key) };
}
