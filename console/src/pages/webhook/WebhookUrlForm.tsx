import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { useWebhookAnswer } from './webhook-answer.ts';

export function WebhookUrlForm({
  current,
  onSecret,
  onDone,
}: {
  current: string | null;
  onSecret: (secret: string) => void;
  onDone?: () => void;
}) {
  const [url, setUrl] = useState(current ?? '');
  const answered = useWebhookAnswer(onSecret);
  const save = useMutation({
    mutationFn: () => webhookApi.put({ url: url.trim() }),
    onSuccess: async (webhook) => {
      await answered(webhook);
      onDone?.();
    },
  });
  const errors = formErrors(save.error, ['url']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  return (
    <form className="form inline-form" onSubmit={submit} aria-label="Webhook URL" noValidate>
      <ErrorNotice error={errors.general} />
      <Field label="Endpoint URL" error={errors.of('url')} inline>
        {(props) => (
          <input
            {...props}
            type="url"
            className="input-wide"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            placeholder="https://example.com/hooks/entitlements"
          />
        )}
      </Field>
      <button type="submit" className="button button-primary button-small" disabled={save.isPending}>
        {current === null ? 'Set webhook' : 'Save URL'}
      </button>
      {onDone ? (
        <button type="button" className="button button-small" onClick={onDone}>
          Cancel
        </button>
      ) : null}
    </form>
  );
}
