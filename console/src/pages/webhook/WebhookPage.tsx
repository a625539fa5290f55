import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import { usePermissions } from '../../auth/session.ts';
import { QueryState } from '../../components/Loading.tsx';
import { PageHeader } from '../../components/PageHeader.tsx';
import { SecretOnce } from '../../components/SecretOnce.tsx';
import { DeliveriesTable } from './DeliveriesTable.tsx';
import { WebhookSettings } from './WebhookSettings.tsx';
import { WebhookUrlForm } from './WebhookUrlForm.tsx';
import { WEBHOOK_KEY } from './webhook-answer.ts';

export function WebhookPage() {
  const can = usePermissions();
  const [secret, setSecret] = useState<string | null>(null);
  const webhook = useQuery({ queryKey: WEBHOOK_KEY, queryFn: webhookApi.get, retry: false });
  const none = webhook.data === null;
  return (
    <>
      <PageHeader
        title="Webhook"
        description="One endpoint of yours receives a signed POST for each change to features, plans, subscribers and overrides."
      />
      {secret ? (
        <SecretOnce
          label="Signing secret."
          secret={secret}
          testId="webhook-secret"
          onDone={() => setSecret(null)}
        />
      ) : null}
      <QueryState isPending={webhook.isPending} error={webhook.error} what="the webhook" />
      {none ? (
        <section className="panel" data-testid="webhook-none">
          <p>No webhook is set.</p>
          {can.writeOrg ? <WebhookUrlForm current={null} onSecret={setSecret} /> : null}
        </section>
      ) : null}
      {webhook.data ? <WebhookSettings webhook={webhook.data} onSecret={setSecret} /> : null}
      {webhook.data ? <DeliveriesTable /> : null}
    </>
  );
}
