import { DataTable } from '../../components/DataTable.tsx';
import { formatCount, formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { useUsagePeriods } from './queries.ts';

/** A metered feature's ended periods with their final figures, newest first (GET .../usage/{feature}/periods). */
export function UsagePeriods({
  id,
  subscriberId,
  featureKey,
}: {
  id: string;
  subscriberId: string;
  featureKey: string;
}) {
  const periods = useUsagePeriods(subscriberId, featureKey);
  const loaded = periods.data?.pages.flatMap((page) => page.periods) ?? [];
  return (
    <div id={id} className="usage-periods" data-testid={`usage-periods-${featureKey}`}>
      <QueryState isPending={periods.isPending} error={periods.error} what="past periods" />
      {periods.data ? (
        <DataTable
          compact
          columns={3}
          empty={loaded.length === 0 && 'No earlier period yet.'}
          head={
            <>
              <th>Period from</th>
              <th>to</th>
              <th className="cell-number">Used</th>
            </>
          }
        >
          {loaded.map((period) => (
            <tr key={period.period_start} data-testid="usage-period">
              <td className="cell-nowrap">{formatTime(period.period_start)}</td>
              <td className="cell-nowrap">{period.period_end ? formatTime(period.period_end) : 'never'}</td>
              <td className="cell-number">{formatCount(period.used)}</td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      <LoadMore query={periods} label="More periods" loadingLabel="Loading…" />
    </div>
  );
}
