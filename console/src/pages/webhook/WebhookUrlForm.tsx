import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { webhookApi } from '../../api/webhook.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
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
      <TextField
        label="Endpoint URL"
        type="url"
        className="input-wide"
        value={url}
        onChange={setUrl}
        error={errors.of('url')}
        inline
        placeholder="https://example.com/hooks/entitlements"
      />
      <SubmitButton label={current === null ? 'Set webhook' : 'Save URL'} pending={save.isPending} small />
      {onDone ? (
        <button type="button" className="button button-small" onClick={onDone}>
          Cancel
        </button>
      ) : null}
    </form>
  );
}
