import { useInfiniteQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { subscribersApi } from '../../api/subscribers.ts';
import { usePermissions } from '../../auth/session.ts';
import { DataTable } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { LoadMore } from '../../components/LoadMore.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { TextField } from '../../components/TextField.tsx';
import { useDebounced } from '../../components/use-debounced.ts';
import { CreateSubscriberForm } from './CreateSubscriberForm.tsx';
import { SUBSCRIBERS_KEY } from './queries.ts';

const PAGE_SIZE = 50;
/** The API's bound on `search`. */
const MAX_SEARCH_LENGTH = 200;
const SEARCH_DELAY_MS = 250;

export function SubscribersPage() {
  const can = usePermissions();
  const navigate = useNavigate();
  const [creating, setCreating] = useState(false);
  const [searchText, setSearchText] = useState('');
  const [openId, setOpenId] = useState('');
  // The API searches every subscriber (id prefix or name substring, ignoring case); '' lists them all.
  const search = useDebounced(searchText.trim(), SEARCH_DELAY_MS);
  const subscribers = useInfiniteQuery({
    queryKey: [...SUBSCRIBERS_KEY, { search }],
    queryFn: ({ pageParam }) =>
      subscribersApi.list({ limit: PAGE_SIZE, starting_after: pageParam, search: search || undefined }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.subscribers.at(-1)?.subscriber_id : undefined),
    // While the next search runs, the last answer stays on screen instead of a loading line.
    placeholderData: (previous) => previous,
  });
  const shown = subscribers.data?.pages.flatMap((page) => page.subscribers) ?? [];

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
        <TextField
          label="Search subscribers"
          inline
          type="search"
          value={searchText}
          maxLength={MAX_SEARCH_LENGTH}
          onChange={setSearchText}
          placeholder="id prefix or name"
        />
        <form onSubmit={open} className="inline-form">
          <TextField
            label="Open by id"
            inline
            value={openId}
            onChange={setOpenId}
            placeholder="subscriber id"
          />
          <button type="submit" className="button button-small">
            Open
          </button>
        </form>
      </div>
      <QueryState isPending={subscribers.isPending} error={subscribers.error} what="subscribers" />
      {subscribers.data ? (
        <DataTable
          testId="subscribers-table"
          columns={3}
          empty={
            shown.length === 0 &&
            (search
              ? `No subscriber's id starts with “${search}” or name contains it.`
              : 'No subscribers yet.')
          }
          head={
            <>
              <th>Subscriber id</th>
              <th>Name</th>
              <th>Created</th>
            </>
          }
        >
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
        </DataTable>
      ) : null}
      <LoadMore query={subscribers} label="Load more" loadingLabel="Loading…" />
    </>
  );
}
