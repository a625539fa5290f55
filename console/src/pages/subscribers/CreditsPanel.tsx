import { useMutation } from '@tanstack/react-query';
import { subscribersApi } from '../../api/subscribers.ts';
import type { Credit, CreditStatus } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge, type BadgeTone } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { DataTable, ErrorRow } from '../../components/DataTable.tsx';
import { formatCount, formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { CreditForm } from './CreditForm.tsx';
import { useCredits, useSubscriberChanged, useSubscriberUsage } from './queries.ts';

const STATUS_TONE: Record<CreditStatus, BadgeTone> = {
  scheduled: 'info',
  active: 'good',
  spent: 'neutral',
  expired: 'warn',
  voided: 'bad',
};

/** What is left and of what: "1,200 of 2,000". */
const remainingText = (credit: Credit) => `${formatCount(credit.remaining)} of ${formatCount(credit.amount)}`;

const canVoid = (credit: Credit) => credit.status === 'scheduled' || credit.status === 'active';

/**
 * Credits (DESIGN.md §5 "Credits"): amounts on top of a metered feature's allowance, spent after it by priority,
 * soonest expiry, oldest. Each with what is left, its expiry and status; added and voided by those who may write
 * subscribers. Not shown while the catalog has no metered feature and the subscriber has no credit.
 */
export function CreditsPanel({ subscriberId }: { subscriberId: string }) {
  const can = usePermissions();
  // The usage panel's read: one entry per metered feature of the catalog.
  const hasMetered = (useSubscriberUsage(subscriberId).data?.usage.length ?? 0) > 0;
  const credits = useCredits(subscriberId);
  const changed = useSubscriberChanged(subscriberId);
  const voidCredit = useMutation({
    mutationFn: (creditId: string) => subscribersApi.voidCredit(subscriberId, creditId),
    onSuccess: changed,
  });
  const loaded = credits.data?.pages.flatMap((page) => page.credits) ?? [];
  if (!hasMetered && credits.data && loaded.length === 0) return null;
  const columns = can.writeSubscribers ? 6 : 5;

  return (
    <section className="panel" aria-labelledby="credits-title" data-testid="credits-panel">
      <div className="panel-header">
        <h2 id="credits-title">Credits</h2>
      </div>
      <p className="panel-note">
        Added to a metered feature&apos;s allowance and spent after it: lowest priority number first, then the
        soonest expiry, then the oldest. Voiding one keeps what it already gave.
      </p>
      <QueryState isPending={credits.isPending} error={credits.error} what="credits" />
      {credits.data ? (
        <DataTable
          compact
          columns={columns}
          empty={loaded.length === 0 && 'No credits.'}
          head={
            <>
              <th>Feature</th>
              <th>Credit</th>
              <th>Remaining</th>
              <th>Expires</th>
              <th>Status</th>
              {can.writeSubscribers ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {loaded.map((credit) => [
            <tr key={credit.credit_id} data-testid={`credit-${credit.credit_id}`}>
              <td>
                <code>{credit.feature}</code>
              </td>
              <td>
                {credit.name ?? <code>{credit.credit_id}</code>}
                <div className="cell-muted">
                  priority {credit.priority}
                  {credit.source === 'rollover' ? ', rolled over' : ''}
                  {credit.status === 'scheduled' ? `, from ${formatTime(credit.effective_at)}` : ''}
                </div>
              </td>
              <td className="cell-nowrap" data-testid={`credit-remaining-${credit.credit_id}`}>
                {remainingText(credit)}
              </td>
              <td className="cell-nowrap">{credit.expires_at ? formatTime(credit.expires_at) : 'never'}</td>
              <td>
                <Badge tone={STATUS_TONE[credit.status]}>{credit.status}</Badge>
              </td>
              {can.writeSubscribers ? (
                <td className="cell-actions">
                  {canVoid(credit) ? (
                    <ConfirmButton
                      label="Void credit"
                      confirmLabel="Confirm void"
                      pending={voidCredit.isPending && voidCredit.variables === credit.credit_id}
                      onConfirm={() => voidCredit.mutate(credit.credit_id)}
                    />
                  ) : null}
                </td>
              ) : null}
            </tr>,
            voidCredit.variables === credit.credit_id ? (
              <ErrorRow key={`${credit.credit_id}-error`} error={voidCredit.error} columns={columns} />
            ) : null,
          ])}
        </DataTable>
      ) : null}
      <LoadMore query={credits} label="More credits" loadingLabel="Loading…" />
      {can.writeSubscribers && hasMetered ? (
        <CreditForm subscriberId={subscriberId} onSaved={changed} />
      ) : null}
    </section>
  );
}
