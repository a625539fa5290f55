import { useInfiniteQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import type { DeliveryStatus } from '../../api/types.ts';
import { Badge, type BadgeTone } from '../../components/Badge.tsx';
import { Field } from '../../components/Field.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';

const TONE: Record<DeliveryStatus, BadgeTone> = {
  pending: 'warn',
  succeeded: 'good',
  failed: 'bad',
  canceled: 'neutral',
};

export function DeliveriesTable() {
  const [status, setStatus] = useState('');
  const deliveries = useInfiniteQuery({
    queryKey: ['webhook', 'deliveries', status],
    queryFn: ({ pageParam }) =>
      webhookApi.deliveries({ limit: 50, status: status || undefined, starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.deliveries.at(-1)?.delivery_id : undefined),
  });
  const loaded = deliveries.data?.pages.flatMap((page) => page.deliveries) ?? [];
  return (
    <section className="panel" aria-labelledby="deliveries-title">
      <div className="panel-header">
        <h2 id="deliveries-title">Delivery log</h2>
        <Field label="Delivery status" inline>
          {(props) => (
            <select {...props} value={status} onChange={(e) => setStatus(e.target.value)}>
              <option value="">any</option>
              <option value="pending">pending</option>
              <option value="succeeded">succeeded</option>
              <option value="failed">failed</option>
              <option value="canceled">canceled</option>
            </select>
          )}
        </Field>
      </div>
      <QueryState isPending={deliveries.isPending} error={deliveries.error} what="deliveries" />
      {deliveries.data ? (
        <table className="table table-compact" data-testid="deliveries-table">
          <thead>
            <tr>
              <th>Created</th>
              <th>Event</th>
              <th>Status</th>
              <th className="cell-number">Attempts</th>
              <th>Last answer</th>
              <th>Next attempt / delivered</th>
            </tr>
          </thead>
          <tbody>
            {loaded.length === 0 ? (
              <tr>
                <td colSpan={6} className="empty">
                  No deliveries.
                </td>
              </tr>
            ) : null}
            {loaded.map((delivery) => (
              <tr key={delivery.delivery_id}>
                <td className="cell-nowrap">{formatTime(delivery.created_at)}</td>
                <td>
                  <code>{delivery.event_type}</code>
                  <div className="cell-muted">
                    <code>{delivery.event_id}</code>
                  </div>
                </td>
                <td>
                  <Badge tone={TONE[delivery.status]}>{delivery.status}</Badge>
                </td>
                <td className="cell-number">{delivery.attempts}</td>
                <td>
                  {delivery.last_status_code ?? '—'}
                  {delivery.last_error ? <div className="cell-muted">{delivery.last_error}</div> : null}
                </td>
                <td className="cell-nowrap">
                  {delivery.delivered_at
                    ? formatTime(delivery.delivered_at)
                    : formatTime(delivery.next_attempt_at)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {deliveries.hasNextPage ? (
        <button
          type="button"
          className="button"
          disabled={deliveries.isFetchingNextPage}
          onClick={() => void deliveries.fetchNextPage()}
        >
          Load older deliveries
        </button>
      ) : null}
    </section>
  );
}
