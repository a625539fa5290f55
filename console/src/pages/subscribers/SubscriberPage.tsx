import { Link, useParams } from 'react-router';
import { isApiError } from '../../api/errors.ts';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { CreditsPanel } from './CreditsPanel.tsx';
import { EntitlementsPanel } from './EntitlementsPanel.tsx';
import { OverridesPanel } from './OverridesPanel.tsx';
import { SubscriberName } from './SubscriberName.tsx';
import { SubscriptionsPanel } from './SubscriptionsPanel.tsx';
import { UsagePanel } from './UsagePanel.tsx';
import { useSubscriber } from './queries.ts';

export function SubscriberPage() {
  const { subscriberId = '' } = useParams();
  const subscriber = useSubscriber(subscriberId);
  const notFound = isApiError(subscriber.error) && subscriber.error.status === 404;

  return (
    <>
      <p className="breadcrumb">
        <Link to="/subscribers">Subscribers</Link> /
      </p>
      <PageHeader
        title={subscriberId}
        description={subscriber.data ? <>Created {formatTime(subscriber.data.created_at)}</> : null}
      />
      {notFound ? (
        <div className="notice notice-error" role="alert">
          No subscriber has the id <code>{subscriberId}</code>.
        </div>
      ) : (
        <QueryState isPending={subscriber.isPending} error={subscriber.error} what="the subscriber" />
      )}
      {subscriber.data ? (
        <div className="detail-grid">
          <div className="detail-main">
            <SubscriberName subscriber={subscriber.data} />
            <SubscriptionsPanel subscriberId={subscriberId} />
            <UsagePanel subscriberId={subscriberId} />
            <CreditsPanel subscriberId={subscriberId} />
            <OverridesPanel subscriberId={subscriberId} />
          </div>
          <aside className="detail-side">
            <EntitlementsPanel subscriberId={subscriberId} />
          </aside>
        </div>
      ) : null}
    </>
  );
}
