import { useInfiniteQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import type { DeliveryStatus } from '../../api/types.ts';
import { Badge, type BadgeTone } from '../../components/Badge.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { SelectField } from '../../components/SelectField.tsx';

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
        <SelectField label="Delivery status" inline value={status} onChange={setStatus}>
          <option value="">any</option>
          <option value="pending">pending</option>
          <option value="succeeded">succeeded</option>
          <option value="failed">failed</option>
          <option value="canceled">canceled</option>
        </SelectField>
      </div>
      <QueryState isPending={deliveries.isPending} error={deliveries.error} what="deliveries" />
      {deliveries.data ? (
        <DataTable
          compact
          testId="deliveries-table"
          columns={6}
          empty={loaded.length === 0 && 'No deliveries.'}
          head={
            <>
              <th>Created</th>
              <th>Event</th>
              <th>Status</th>
              <th className="cell-number">Attempts</th>
              <th>Last answer</th>
              <th>Next attempt / delivered</th>
            </>
          }
        >
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
        </DataTable>
      ) : null}
      <LoadMore query={deliveries} label="Load older deliveries" />
    </section>
  );
}
