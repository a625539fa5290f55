import type pg from 'pg';
import { expectStatus } from './http.ts';
import type { FaultOrganization } from './organization.ts';

const DAY_MS = 86_400_000;

/**
 * Makes `boundaryAt` the end of the subscribers' current daily period: their subscriptions' anchor is set a day
 * earlier in Postgres (the services take the system clock, and no route sets an anchor), then each subscriber is
 * renamed through a gateway, a write that bumps its version and publishes its document rebuilt from Postgres, so
 * every gateway resolves the new periods from the next eval on. Done before any consume: all usage falls in the
 * period ending at `boundaryAt` or the one starting there.
 */
export async function placePeriodBoundary(
  pool: pg.Pool,
  gatewayUrl: string,
  org: FaultOrganization,
  subscribers: readonly string[],
  boundaryAt: number,
): Promise<void> {
  await pool.query(
    `UPDATE subscriptions SET anchored_at = to_timestamp($3::double precision / 1000)
     WHERE organization_id = $1 AND subscriber_id = ANY($2::text[]) AND status = 'active'`,
    [org.organizationId, subscribers, boundaryAt - DAY_MS],
  );
  for (const subscriber of subscribers) {
    await expectStatus(
      {
        method: 'PATCH',
        url: `${gatewayUrl}/org/subscribers/${subscriber}`,
        apiKey: org.apiKey,
        body: { name: `${subscriber} (anchored ${new Date(boundaryAt - DAY_MS).toISOString()})` },
      },
      200,
    );
  }
}
