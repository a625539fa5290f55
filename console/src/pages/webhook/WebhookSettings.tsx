import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import type { Webhook } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formatTime } from '../../components/format.ts';
import { useWebhookAnswer } from './webhook-answer.ts';
import { WebhookUrlForm } from './WebhookUrlForm.tsx';

export function WebhookSettings({
  webhook,
  onSecret,
}: {
  webhook: Webhook;
  onSecret: (secret: string) => void;
}) {
  const can = usePermissions();
  const answered = useWebhookAnswer(onSecret);
  const [editing, setEditing] = useState(false);
  const rotate = useMutation({ mutationFn: webhookApi.rotate, onSuccess: answered });
  const toggle = useMutation({
    mutationFn: () => (webhook.disabled ? webhookApi.enable() : webhookApi.disable()),
    onSuccess: answered,
  });

  return (
    <section className="panel" data-testid="webhook-settings">
      <dl className="facts">
        <dt>URL</dt>
        <dd>
          <code data-testid="webhook-url">{webhook.url}</code>
        </dd>
        <dt>State</dt>
        <dd>
          {webhook.disabled ? <Badge tone="bad">disabled</Badge> : <Badge tone="good">enabled</Badge>}
          {webhook.disabled_reason ? <span className="cell-muted"> ({webhook.disabled_reason})</span> : null}
        </dd>
        <dt>Secret</dt>
        <dd>
          <code>{webhook.secret_prefix}…</code>
          {webhook.previous_secret_expires_at ? (
            <span className="cell-muted">
              {' '}
              (the previous secret also signs until {formatTime(webhook.previous_secret_expires_at)})
            </span>
          ) : null}
        </dd>
        <dt>Updated</dt>
        <dd>{formatTime(webhook.updated_at)}</dd>
      </dl>
      {can.writeOrg ? (
        editing ? (
          <WebhookUrlForm current={webhook.url} onSecret={onSecret} onDone={() => setEditing(false)} />
        ) : (
          <div className="form-actions">
            <button type="button" className="button button-small" onClick={() => setEditing(true)}>
              Change URL
            </button>
            <ConfirmButton
              label="Rotate secret"
              confirmLabel="Confirm rotate"
              pending={rotate.isPending}
              onConfirm={() => rotate.mutate()}
            />
            <button
              type="button"
              className="button button-small"
              disabled={toggle.isPending}
              onClick={() => toggle.mutate()}
            >
              {webhook.disabled ? 'Enable' : 'Disable'}
            </button>
          </div>
        )
      ) : null}
      <ErrorNotice error={rotate.error ?? toggle.error} />
    </section>
  );
}
