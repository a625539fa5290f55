import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { subscribersApi } from '../../api/subscribers.ts';
import type { Override } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formatLimit, formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { OverrideForm } from './OverrideForm.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { useOverrides, useSubscriberChanged } from './queries.ts';

const valueOf = (override: Override) => {
  switch (override.kind) {
    case 'flag':
      return override.allowed ? 'allowed' : 'denied';
    case 'limit':
      return formatLimit(override.limit);
    case 'metered':
      return `${formatLimit(override.limit)} per period`;
  }
};

const isExpired = (override: Override) =>
  override.expires_at !== null && Date.parse(override.expires_at) <= Date.now();

export function OverridesPanel({ subscriberId }: { subscriberId: string }) {
  const can = usePermissions();
  const [includeExpired, setIncludeExpired] = useState(false);
  const overrides = useOverrides(subscriberId, includeExpired);
  const listed = overrides.data?.pages.flatMap((page) => page.overrides) ?? [];
  const changed = useSubscriberChanged(subscriberId);
  const remove = useMutation({
    mutationFn: (feature: string) => subscribersApi.deleteOverride(subscriberId, feature),
    onSuccess: changed,
  });

  return (
    <section className="panel" aria-labelledby="overrides-title" data-testid="overrides-panel">
      <div className="panel-header">
        <h2 id="overrides-title">Overrides</h2>
        <label className="checkbox">
          <input
            type="checkbox"
            checked={includeExpired}
            onChange={(e) => setIncludeExpired(e.target.checked)}
          />{' '}
          Show expired
        </label>
      </div>
      <p className="panel-note">
        An override's value replaces what the plans grant for that feature, until it expires or is deleted.
      </p>
      <QueryState isPending={overrides.isPending} error={overrides.error} what="overrides" />
      {overrides.data ? (
        <DataTable
          compact
          columns={5}
          empty={listed.length === 0 && 'No overrides.'}
          head={
            <>
              <th>Feature</th>
              <th>Value</th>
              <th>Expires</th>
              <th>Updated</th>
              {can.writeSubscribers ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {listed.map((override) => (
            <tr key={override.id} data-testid={`override-${override.feature}`}>
              <td>
                <code>{override.feature}</code>
              </td>
              <td>{valueOf(override)}</td>
              <td className="cell-nowrap">
                {override.expires_at ? formatTime(override.expires_at) : 'never'}{' '}
                {isExpired(override) ? <Badge tone="bad">expired</Badge> : null}
              </td>
              <td className="cell-nowrap">{formatTime(override.updated_at)}</td>
              {can.writeSubscribers ? (
                <td className="cell-actions">
                  <ConfirmButton
                    label="Delete override"
                    confirmLabel="Confirm delete"
                    pending={remove.isPending && remove.variables === override.feature}
                    onConfirm={() => remove.mutate(override.feature)}
                  />
                </td>
              ) : null}
            </tr>
          ))}
        </DataTable>
      ) : null}
      <LoadMore query={overrides} label="More overrides" loadingLabel="Loading…" />
      <ErrorNotice error={remove.error} />
      {can.writeSubscribers ? <OverrideForm subscriberId={subscriberId} onSaved={changed} /> : null}
    </section>
  );
}
