import type { Entitlement } from '../../api/types.ts';
import { Badge } from '../../components/Badge.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { formatCount, formatLimit } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { useEntitlements } from './queries.ts';
import { SOURCE_TONE } from './source-tone.ts';

const valueOf = (entitlement: Entitlement) => {
  switch (entitlement.kind) {
    case 'flag':
      return entitlement.allowed ? 'allowed' : 'denied';
    case 'limit':
      return formatLimit(entitlement.limit);
    case 'metered': {
      const used = `${formatCount(entitlement.used)} of ${formatLimit(entitlement.limit)} used`;
      // Credits count in `remaining`: past the allowance is not "stopped" while they hold something.
      const credits = (entitlement.credits ?? []).length > 0;
      return credits && entitlement.remaining !== null
        ? `${used}; ${formatCount(entitlement.remaining)} left with credits`
        : used;
    }
  }
};

/**
 * "What this subscriber gets": every catalog feature as an eval answers it now (GET entitlements?all=true,
 * answered by the gateway and counted as one eval). Read again after every change on this page.
 */
export function EntitlementsPanel({ subscriberId }: { subscriberId: string }) {
  const entitlements = useEntitlements(subscriberId);
  return (
    <section className="panel" data-testid="entitlements-panel" aria-labelledby="entitlements-title">
      <div className="panel-header">
        <h2 id="entitlements-title">What this subscriber gets</h2>
        <button
          type="button"
          className="button button-small"
          disabled={entitlements.isFetching}
          onClick={() => void entitlements.refetch()}
        >
          {entitlements.isFetching ? 'Checking…' : 'Check again'}
        </button>
      </div>
      <p className="panel-note">Live answer of an eval (counts toward this month's usage).</p>
      <QueryState isPending={entitlements.isPending} error={entitlements.error} what="entitlements" />
      {entitlements.data ? (
        <DataTable
          compact
          columns={3}
          empty={entitlements.data.entitlements.length === 0 && 'The catalog has no features.'}
          head={
            <>
              <th>Feature</th>
              <th>Value</th>
              <th>Source</th>
            </>
          }
        >
          {entitlements.data.entitlements.map((entitlement) => (
            <tr key={entitlement.feature} data-testid={`entitlement-${entitlement.feature}`}>
              <td>
                <code>{entitlement.feature}</code>
              </td>
              <td
                className={
                  entitlement.kind === 'flag'
                    ? entitlement.allowed
                      ? 'value-yes'
                      : 'value-no'
                    : 'cell-number'
                }
                data-testid={`entitlement-value-${entitlement.feature}`}
              >
                {valueOf(entitlement)}
              </td>
              <td>
                <Badge tone={SOURCE_TONE[entitlement.source]}>{entitlement.source}</Badge>
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
    </section>
  );
}
