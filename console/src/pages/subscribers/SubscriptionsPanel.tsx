import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { subscribersApi } from '../../api/subscribers.ts';
import type { Plan, Subscription } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { DataTable, ErrorRow } from '../../components/DataTable.tsx';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { usePlans } from '../plans/queries.ts';
import { PlanSelect } from './PlanSelect.tsx';
import { useSubscriberChanged, useSubscriptions } from './queries.ts';

export function SubscriptionsPanel({ subscriberId }: { subscriberId: string }) {
  const can = usePermissions();
  const subscriptions = useSubscriptions(subscriberId);
  const plans = usePlans();
  const changed = useSubscriberChanged(subscriberId);
  const [planKey, setPlanKey] = useState('');
  const subscribe = useMutation({
    mutationFn: () => subscribersApi.subscribe(subscriberId, planKey),
    onSuccess: async () => {
      setPlanKey('');
      await changed();
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (planKey) subscribe.mutate();
  };
  const all = subscriptions.data?.subscriptions ?? [];
  const ordered = [...all.filter((s) => s.status === 'active'), ...all.filter((s) => s.status !== 'active')];

  return (
    <section className="panel" aria-labelledby="subscriptions-title" data-testid="subscriptions-panel">
      <h2 id="subscriptions-title">Subscriptions</h2>
      <QueryState isPending={subscriptions.isPending} error={subscriptions.error} what="subscriptions" />
      {subscriptions.data ? (
        <DataTable
          compact
          columns={5}
          empty={ordered.length === 0 && 'No subscriptions.'}
          head={
            <>
              <th>Plan</th>
              <th>Status</th>
              <th>Started</th>
              <th>Canceled</th>
              {can.writeSubscribers ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {ordered.map((subscription) => (
            <SubscriptionRow
              key={subscription.subscription_id}
              subscription={subscription}
              plans={plans.data?.items ?? []}
              onChanged={changed}
            />
          ))}
        </DataTable>
      ) : null}
      {can.writeSubscribers ? (
        <form className="inline-form" onSubmit={submit}>
          <PlanSelect
            plans={plans.data?.items ?? []}
            value={planKey}
            onChange={setPlanKey}
            label="Plan to subscribe to"
          />
          <SubmitButton label="Subscribe" pending={subscribe.isPending} disabled={!planKey} small />
        </form>
      ) : null}
      <ErrorNotice error={subscribe.error} />
    </section>
  );
}

function SubscriptionRow({
  subscription,
  plans,
  onChanged,
}: {
  subscription: Subscription;
  plans: readonly Plan[];
  onChanged: () => Promise<void>;
}) {
  const can = usePermissions();
  const [changeTo, setChangeTo] = useState('');
  const { subscriber_id: subscriberId, subscription_id: subscriptionId } = subscription;
  const change = useMutation({
    mutationFn: () =>
      subscribersApi.changeSubscription(subscriberId, { plan_id: changeTo, subscription_id: subscriptionId }),
    onSuccess: onChanged,
  });
  const cancel = useMutation({
    mutationFn: () => subscribersApi.cancelSubscription(subscriberId, subscriptionId),
    onSuccess: onChanged,
  });
  const active = subscription.status === 'active';
  const error = change.error ?? cancel.error;
  return (
    <>
      <tr
        data-testid={`subscription-${subscription.plan_id}`}
        className={active ? undefined : 'row-archived'}
      >
        <td>
          <code>{subscription.plan_id}</code>
        </td>
        <td>{active ? <Badge tone="good">active</Badge> : <Badge>canceled</Badge>}</td>
        <td className="cell-nowrap">{formatTime(subscription.created_at)}</td>
        <td className="cell-nowrap">{formatTime(subscription.canceled_at)}</td>
        {can.writeSubscribers ? (
          <td className="cell-actions">
            {active ? (
              <div className="row-actions">
                <PlanSelect
                  plans={plans}
                  value={changeTo}
                  onChange={setChangeTo}
                  label={`New plan for ${subscription.plan_id}`}
                  exclude={subscription.plan_id}
                />
                <button
                  type="button"
                  className="button button-small"
                  disabled={!changeTo || change.isPending}
                  onClick={() => change.mutate()}
                >
                  Change plan
                </button>
                <ConfirmButton
                  label="Cancel subscription"
                  confirmLabel="Confirm cancel"
                  pending={cancel.isPending}
                  onConfirm={() => cancel.mutate()}
                />
              </div>
            ) : null}
          </td>
        ) : null}
      </tr>
      <ErrorRow error={error} columns={5} />
    </>
  );
}
