import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { useNavigate } from 'react-router';
import { subscribersApi } from '../../api/subscribers.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SUBSCRIBERS_KEY } from './queries.ts';

export function CreateSubscriberForm({ onDone }: { onDone: () => void }) {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () =>
      subscribersApi.create({ subscriber_id: id.trim(), ...(name.trim() ? { name: name.trim() } : {}) }),
    onSuccess: async (subscriber) => {
      await queryClient.invalidateQueries({ queryKey: SUBSCRIBERS_KEY });
      onDone();
      navigate(`/subscribers/${encodeURIComponent(subscriber.subscriber_id)}`);
    },
  });
  const errors = formErrors(create.error, ['subscriber_id', 'name']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  return (
    <form onSubmit={submit} className="panel form form-grid" aria-label="New subscriber" noValidate>
      <ErrorNotice error={errors.general} />
      <Field
        label="Subscriber id"
        error={errors.of('subscriber_id')}
        hint="Your own id for this customer: letters, digits and _ . : @ + -."
      >
        {(props) => (
          <input {...props} value={id} onChange={(e) => setId(e.target.value)} placeholder="acct_42" />
        )}
      </Field>
      <Field label="Subscriber name" error={errors.of('name')}>
        {(props) => (
          <input {...props} value={name} onChange={(e) => setName(e.target.value)} placeholder="Acme Inc." />
        )}
      </Field>
      <div className="form-actions">
        <button type="submit" className="button button-primary" disabled={create.isPending}>
          Create subscriber
        </button>
        <button type="button" className="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
