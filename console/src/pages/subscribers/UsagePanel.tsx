import { usePermissions } from '../../auth/session.ts';
import { QueryState } from '../../components/Loading.tsx';
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { creditsKey, useSubscriberUsage } from './queries.ts';
import { UsageMeterItem } from './UsageMeterItem.tsx';

/**
 * Metered usage (DESIGN.md §5): every metered feature's current period as a bar of used against the limit, when
 * it resets, a correction for those who may write subscribers, and the periods before. Not shown while the
 * catalog has no metered feature.
 */
export function UsagePanel({ subscriberId }: { subscriberId: string }) {
  const can = usePermissions();
  const usage = useSubscriberUsage(subscriberId);
  const queryClient = useQueryClient();
  // Each new reading of the usage (Read again, the periodic refresh) reads the credits again too: spending moves what
  // they have left, and the credits panel must not disagree with the bars beside it.
  const firstReading = useRef<number | null>(null);
  useEffect(() => {
    if (usage.dataUpdatedAt === 0) return;
    // The page's first reading came with the credits' own first read.
    firstReading.current ??= usage.dataUpdatedAt;
    if (usage.dataUpdatedAt !== firstReading.current)
      void queryClient.invalidateQueries({ queryKey: creditsKey(subscriberId) });
  }, [usage.dataUpdatedAt, queryClient, subscriberId]);
  if (usage.data && usage.data.usage.length === 0) return null;
  return (
    <section className="panel" aria-labelledby="metered-usage-title" data-testid="metered-usage-panel">
      <div className="panel-header">
        <h2 id="metered-usage-title">Metered usage</h2>
        <button
          type="button"
          className="button button-small"
          disabled={usage.isFetching}
          onClick={() => void usage.refetch()}
        >
          {usage.isFetching ? 'Reading…' : 'Read again'}
        </button>
      </div>
      <p className="panel-note">
        This period&apos;s use of each metered feature, as the gateways count it (reads count no eval).
      </p>
      <QueryState isPending={usage.isPending} error={usage.error} what="metered usage" />
      {usage.data ? (
        <ul className="meters">
          {usage.data.usage.map((feature) => (
            <UsageMeterItem
              key={feature.feature}
              subscriberId={subscriberId}
              usage={feature}
              canCorrect={can.writeSubscribers}
            />
          ))}
        </ul>
      ) : null}
    </section>
  );
}
