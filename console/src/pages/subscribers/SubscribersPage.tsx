import { useInfiniteQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { subscribersApi } from '../../api/subscribers.ts';
import { usePermissions } from '../../auth/session.ts';
import { Field } from '../../components/Field.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { CreateSubscriberForm } from './CreateSubscriberForm.tsx';
import { SUBSCRIBERS_KEY } from './queries.ts';

const PAGE_SIZE = 50;

export function SubscribersPage() {
  const can = usePermissions();
  const navigate = useNavigate();
  const [creating, setCreating] = useState(false);
  const [filter, setFilter] = useState('');
  const [openId, setOpenId] = useState('');
  const subscribers = useInfiniteQuery({
    queryKey: SUBSCRIBERS_KEY,
    queryFn: ({ pageParam }) => subscribersApi.list({ limit: PAGE_SIZE, starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.subscribers.at(-1)?.subscriber_id : undefined),
  });
  const loaded = subscribers.data?.pages.flatMap((page) => page.subscribers) ?? [];
  const needle = filter.trim().toLowerCase();
  const shown = needle
    ? loaded.filter(
        (s) =>
          s.subscriber_id.toLowerCase().includes(needle) || (s.name ?? '').toLowerCase().includes(needle),
      )
    : loaded;

  const open = (event: FormEvent) => {
    event.preventDefault();
    if (openId.trim()) navigate(`/subscribers/${encodeURIComponent(openId.trim())}`);
  };

  return (
    <>
      <PageHeader
        title="Subscribers"
        description="Your customers, under the ids you chose, and the plans they subscribe to."
        actions={
          can.writeSubscribers && !creating ? (
            <button type="button" className="button button-primary" onClick={() => setCreating(true)}>
              New subscriber
            </button>
          ) : null
        }
      />
      {creating ? <CreateSubscriberForm onDone={() => setCreating(false)} /> : null}
      <div className="toolbar">
        <Field label="Search loaded subscribers" inline>
          {(props) => (
            <input
              {...props}
              type="search"
              value={filter}
              onChange={(e) => setFilter(e.target.value)}
              placeholder="id or name"
            />
          )}
        </Field>
        <form onSubmit={open} className="inline-form">
          <Field label="Open by id" inline>
            {(props) => (
              <input
                {...props}
                value={openId}
                onChange={(e) => setOpenId(e.target.value)}
                placeholder="subscriber id"
              />
            )}
          </Field>
          <button type="submit" className="button button-small">
            Open
          </button>
        </form>
      </div>
      <QueryState isPending={subscribers.isPending} error={subscribers.error} what="subscribers" />
      {subscribers.data ? (
        <table className="table" data-testid="subscribers-table">
          <thead>
            <tr>
              <th>Subscriber id</th>
              <th>Name</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {shown.length === 0 ? (
              <tr>
                <td colSpan={3} className="empty">
                  {loaded.length === 0 ? 'No subscribers yet.' : 'No loaded subscriber matches.'}
                </td>
              </tr>
            ) : null}
            {shown.map((subscriber) => (
              <tr key={subscriber.subscriber_id}>
                <td>
                  <Link to={`/subscribers/${encodeURIComponent(subscriber.subscriber_id)}`}>
                    <code>{subscriber.subscriber_id}</code>
                  </Link>
                </td>
                <td>{subscriber.name ?? <span className="cell-muted">—</span>}</td>
                <td className="cell-nowrap">{formatTime(subscriber.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {subscribers.hasNextPage ? (
        <button
          type="button"
          className="button"
          disabled={subscribers.isFetchingNextPage}
          onClick={() => void subscribers.fetchNextPage()}
        >
          {subscribers.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      ) : null}
    </>
  );
}
