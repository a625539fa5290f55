import { useState } from 'react';
import { usePermissions } from '../../auth/session.ts';
import { DataTable } from '../../components/DataTable.tsx';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { useFeatures } from '../features/queries.ts';
import { CreatePlanForm } from './CreatePlanForm.tsx';
import { PlanRow } from './PlanRow.tsx';
import { usePlansWithCounts } from './queries.ts';

export function PlansPage() {
  const can = usePermissions();
  const plans = usePlansWithCounts();
  const features = useFeatures();
  const [creating, setCreating] = useState(false);
  // Archived plans take no new subscriptions: what a new reader looks for is the plans in use.
  const [showArchived, setShowArchived] = useState(false);
  const catalog = features.data?.items ?? [];
  const visible = (plans.data?.items ?? []).filter((plan) => showArchived || !plan.archived);

  return (
    <>
      <PageHeader
        title="Plans"
        description="Each plan grants features; subscribers get what their active subscriptions' plans grant."
        actions={
          can.writeCatalog && !creating ? (
            <button
              type="button"
              className="button button-primary"
              disabled={!features.data}
              onClick={() => setCreating(true)}
            >
              New plan
            </button>
          ) : null
        }
      />
      {creating && features.data ? (
        <CreatePlanForm features={catalog} onDone={() => setCreating(false)} />
      ) : null}
      <QueryState isPending={plans.isPending} error={plans.error ?? features.error} what="plans" />
      <div className="toolbar">
        <label className="checkbox">
          <input type="checkbox" checked={showArchived} onChange={(e) => setShowArchived(e.target.checked)} />{' '}
          Show archived plans
        </label>
        <span className="cell-muted" data-testid="plan-count-note">
          Subscribers: active subscriptions of each plan.
        </span>
      </div>
      {plans.data ? (
        <DataTable
          testId="plans-table"
          columns={7}
          empty={
            visible.length === 0 &&
            (plans.data.items.length > 0
              ? 'Every plan is archived: show archived plans to see them.'
              : 'No plans yet.')
          }
          head={
            <>
              <th>Key</th>
              <th>Name</th>
              <th>Kind</th>
              <th>Grants</th>
              <th className="cell-number">Subscribers</th>
              <th>Status</th>
              {can.writeCatalog ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {visible.map((plan) => (
            <PlanRow key={plan.key} plan={plan} features={catalog} />
          ))}
        </DataTable>
      ) : null}
    </>
  );
}
