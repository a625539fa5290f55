import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import { usePermissions } from '../../auth/session.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { CreateServiceAccountForm } from './CreateServiceAccountForm.tsx';
import { ServiceAccountCard } from './ServiceAccountCard.tsx';
import { SERVICE_ACCOUNTS_KEY } from './queries.ts';

export function ServiceAccountsPage() {
  const can = usePermissions();
  const [creating, setCreating] = useState(false);
  const accounts = useQuery({ queryKey: SERVICE_ACCOUNTS_KEY, queryFn: accessApi.serviceAccounts });
  return (
    <>
      <PageHeader
        title="Service accounts"
        description="Your backends call the API with keys of a service account. Keys are server-side secrets: never put one in a browser or app."
        actions={
          can.writeOrg && !creating ? (
            <button type="button" className="button button-primary" onClick={() => setCreating(true)}>
              New service account
            </button>
          ) : null
        }
      />
      {creating ? <CreateServiceAccountForm onDone={() => setCreating(false)} /> : null}
      <QueryState isPending={accounts.isPending} error={accounts.error} what="service accounts" />
      {accounts.data?.service_accounts.length === 0 ? (
        <p className="empty">No service accounts yet.</p>
      ) : null}
      {accounts.data?.service_accounts.map((account) => (
        <ServiceAccountCard key={account.service_account_id} account={account} />
      ))}
    </>
  );
}
