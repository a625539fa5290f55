import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Pool } from 'undici';
import { ADMIN_FORWARD_TIMEOUT_MS } from '@ent/common/http/server-options';
import type { SessionDoc } from '@ent/common/auth/session-doc';
import type { Arrangement } from '@ent/common/metering/arrangement';
import type { ApiKeyDoc, CatalogDoc, SubscriberDoc, Versioned } from '@ent/common/snapshots/documents';
import type { PersistedFigures } from '../metering/metered-balances.ts';

export class AdminUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AdminUnavailableError';
  }
}

export interface AdminClient {
  /** Rebuilt from Postgres; null when no such key was ever issued. */
  apiKey(keyHash: string): Promise<{ organizationId: string; version: number; doc: ApiKeyDoc | null } | null>;
  /** Rebuilt from Postgres; version 0 and `exists: false` for an unknown subscriber. */
  subscriber(organizationId: string, subscriberId: string): Promise<Versioned<SubscriberDoc>>;
  organization(
    organizationId: string,
  ): Promise<{ catalog: Versioned<CatalogDoc>; auth_version: number; arrangement: Arrangement }>;
  /** The console session of this token hash while it lives, else null; asked on every request that uses one. */
  session(tokenHash: string): Promise<SessionDoc | null>;
  /**
   * The organization's persisted metered balances a refill puts back (Redis lost them), and what its live credits
   * spent.
   */
  meteredBalances(organizationId: string): Promise<PersistedFigures>;
}

interface OpenBalanceBody {
  subscriber_id: string;
  feature: string;
  period_start_ms: number;
  period_end_ms: number | null;
  used: number;
  revision: number;
  covered?: number;
  rollover?: number;
}

interface CreditSpentBody {
  subscriber_id: string;
  feature: string;
  credit_id: string;
  spent: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    adminPool: Pool;
    adminClient: AdminClient;
  }
}

const isRouteNotFound = (body: unknown): boolean => {
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof message === 'string' && message.startsWith('No route ');
};

/** One undici Pool to admin: the forwarder and the internal rebuild calls share it. */
export const adminClient = fp<{ onRebuildRequest?: (kind: string) => void }>(
  async function adminClient(app: FastifyInstance, options) {
    const pool = new Pool(app.config.adminUrl, {
      connections: 128,
      keepAliveTimeout: 30_000,
      connect: { timeout: 2000 },
      // Defaults for the forwarded requests; the internal rebuild calls set their own, shorter ones.
      headersTimeout: ADMIN_FORWARD_TIMEOUT_MS,
      bodyTimeout: ADMIN_FORWARD_TIMEOUT_MS,
    });
    const token = app.config.internalToken;

    async function call<T>(path: string, body: Record<string, unknown> | null): Promise<{ status: number; body: T }> {
      options.onRebuildRequest?.(path.split('/').pop()?.split('?')[0] ?? path);
      let response;
      try {
        response = await pool.request({
          path,
          method: body === null ? 'GET' : 'POST',
          headers: {
            ...(body === null ? {} : { 'content-type': 'application/json' }),
            ...(token ? { 'x-internal-token': token } : {}),
          },
          body: body === null ? null : JSON.stringify(body),
          headersTimeout: 5000,
          bodyTimeout: 5000,
        });
      } catch (error) {
        throw new AdminUnavailableError(`admin unreachable: ${(error as Error).message}`);
      }
      const json = (await response.body.json().catch(() => null)) as T;
      if (response.statusCode >= 500) throw new AdminUnavailableError(`admin answered ${response.statusCode}`);
      // Admin hides its internal routes from a caller without the right token; taking that 404 for "no such key"
      // would turn an INTERNAL_TOKEN mismatch into every key being refused.
      if (response.statusCode === 404 && isRouteNotFound(json)) {
        throw new AdminUnavailableError(`admin refused ${path}: INTERNAL_TOKEN differs between gateway and admin`);
      }
      return { status: response.statusCode, body: json };
    }

    const client: AdminClient = {
      async apiKey(keyHash) {
        const res = await call<{ organization_id: string; version: number; doc: ApiKeyDoc | null }>(
          '/internal/snapshots/api-key',
          { key_hash: keyHash },
        );
        if (res.status === 404) return null;
        if (res.status !== 200) throw new AdminUnavailableError(`admin answered ${res.status}`);
        return { organizationId: res.body.organization_id, version: res.body.version, doc: res.body.doc };
      },
      async subscriber(organizationId, subscriberId) {
        const res = await call<Versioned<SubscriberDoc>>('/internal/snapshots/subscriber', {
          organization_id: organizationId,
          subscriber_id: subscriberId,
        });
        if (res.status !== 200) throw new AdminUnavailableError(`admin answered ${res.status}`);
        return res.body;
      },
      async organization(organizationId) {
        const res = await call<Awaited<ReturnType<AdminClient['organization']>>>('/internal/snapshots/organization', {
          organization_id: organizationId,
        });
        if (res.status !== 200) throw new AdminUnavailableError(`admin answered ${res.status}`);
        return res.body;
      },
      async session(tokenHash) {
        const res = await call<{ session: SessionDoc | null }>('/internal/session', { token_hash: tokenHash });
        if (res.status !== 200) throw new AdminUnavailableError(`admin answered ${res.status}`);
        return res.body.session;
      },
      async meteredBalances(organizationId) {
        const res = await call<{ balances: OpenBalanceBody[]; credits?: CreditSpentBody[] }>(
          `/internal/metered/balances?organization_id=${encodeURIComponent(organizationId)}`,
          null,
        );
        if (res.status !== 200) throw new AdminUnavailableError(`admin answered ${res.status}`);
        return {
          balances: res.body.balances.map((balance) => ({
            subscriberId: balance.subscriber_id,
            feature: balance.feature,
            periodStartMs: balance.period_start_ms,
            periodEndMs: balance.period_end_ms,
            used: balance.used,
            revision: balance.revision,
            covered: balance.covered ?? 0,
            rollover: balance.rollover ?? 0,
          })),
          credits: (res.body.credits ?? []).map((credit) => ({
            subscriberId: credit.subscriber_id,
            feature: credit.feature,
            creditId: credit.credit_id,
            spent: credit.spent,
          })),
        };
      },
    };

    app.decorate('adminPool', pool);
    app.decorate('adminClient', client);
    app.addHook('onClose', async () => pool.close());
  },
  { name: 'admin-client', dependencies: ['infrastructure'] },
);
