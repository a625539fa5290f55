import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import type { CreatedApiKey, ServiceAccount } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { SecretOnce } from '../../components/SecretOnce.tsx';
import { ApiKeyRow } from './ApiKeyRow.tsx';
import { CreateApiKeyForm } from './CreateApiKeyForm.tsx';
import { apiKeysKey } from './queries.ts';

export function ServiceAccountCard({ account }: { account: ServiceAccount }) {
  const can = usePermissions();
  const manage = can.manageKeysOf(account.role) && account.status === 'active';
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const keys = useQuery({
    queryKey: apiKeysKey(account.service_account_id),
    queryFn: () => accessApi.apiKeys(account.service_account_id),
  });

  return (
    <section
      className="panel"
      data-testid={`service-account-${account.name}`}
      aria-label={`Service account ${account.name}`}
    >
      <div className="panel-header">
        <h2>
          {account.name} <Badge tone="info">{account.role}</Badge>{' '}
          {account.status !== 'active' ? <Badge tone="bad">{account.status}</Badge> : null}
        </h2>
        <span className="cell-muted">
          <code>{account.service_account_id}</code> · created {formatTime(account.created_at)}
        </span>
        {manage && !creating ? (
          <button
            type="button"
            className="button button-small button-primary"
            onClick={() => setCreating(true)}
          >
            Create key
          </button>
        ) : null}
      </div>
      {created ? (
        <SecretOnce
          label={`New key "${created.name || created.key_prefix}".`}
          secret={created.api_key}
          testId="new-api-key"
          onDone={() => setCreated(null)}
        />
      ) : null}
      {creating ? (
        <CreateApiKeyForm
          account={account}
          onCreated={(key) => {
            setCreated(key);
            setCreating(false);
          }}
          onCancel={() => setCreating(false)}
        />
      ) : null}
      <QueryState isPending={keys.isPending} error={keys.error} what="keys" />
      {keys.data ? (
        <DataTable
          compact
          columns={7}
          empty={keys.data.api_keys.length === 0 && 'No keys.'}
          head={
            <>
              <th>Prefix</th>
              <th>Name</th>
              <th>Scopes</th>
              <th>Created</th>
              <th>Minted by</th>
              <th>Status</th>
              {manage ? <th aria-label="Actions" /> : null}
            </>
          }
        >
          {keys.data.api_keys.map((key) => (
            <ApiKeyRow key={key.key_id} apiKey={key} manage={manage} />
          ))}
        </DataTable>
      ) : null}
    </section>
  );
}
