import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { Feature, Plan } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorRow } from '../../components/DataTable.tsx';
import { formatCount } from '../../components/format.ts';
import { useCatalogWritten } from '../catalog-written.ts';
import { GrantList } from './GrantList.tsx';
import { PlanGrantsForm } from './PlanGrantsForm.tsx';
import { PLANS_KEY } from './queries.ts';

export function PlanRow({ plan, features }: { plan: Plan; features: readonly Feature[] }) {
  const can = usePermissions();
  const catalogWritten = useCatalogWritten(PLANS_KEY);
  const [editing, setEditing] = useState(false);
  const archive = useMutation({
    mutationFn: () => (plan.archived ? catalogApi.unarchivePlan(plan.key) : catalogApi.archivePlan(plan.key)),
    onSuccess: catalogWritten,
  });
  const columns = can.writeCatalog ? 7 : 6;

  return (
    <>
      <tr data-testid={`plan-row-${plan.key}`} className={plan.archived ? 'row-archived' : undefined}>
        <td>
          <code>{plan.key}</code>
        </td>
        <td>{plan.name}</td>
        <td>{plan.kind}</td>
        <td>
          <GrantList grants={plan.grants} />
        </td>
        <td className="cell-number" data-testid={`plan-subscribers-${plan.key}`}>
          {plan.subscriber_count === undefined ? '—' : formatCount(plan.subscriber_count)}
        </td>
        <td>{plan.archived ? <Badge tone="warn">archived</Badge> : <Badge tone="good">active</Badge>}</td>
        {can.writeCatalog ? (
          <td className="cell-actions">
            {!editing ? (
              <button type="button" className="button button-small" onClick={() => setEditing(true)}>
                Edit grants
              </button>
            ) : null}
            {plan.archived ? (
              <button
                type="button"
                className="button button-small"
                disabled={archive.isPending}
                onClick={() => archive.mutate()}
              >
                Unarchive
              </button>
            ) : (
              <ConfirmButton label="Archive" pending={archive.isPending} onConfirm={() => archive.mutate()} />
            )}
          </td>
        ) : null}
      </tr>
      <ErrorRow error={archive.error} columns={columns} />
      {editing ? (
        <tr className="row-editing">
          <td colSpan={columns}>
            <PlanGrantsForm plan={plan} features={features} onDone={() => setEditing(false)} />
          </td>
        </tr>
      ) : null}
    </>
  );
}
