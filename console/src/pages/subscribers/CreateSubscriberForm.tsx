import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useNavigate } from 'react-router';
import { subscribersApi } from '../../api/subscribers.ts';
import { CreateForm } from '../../components/CreateForm.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { TextField } from '../../components/TextField.tsx';
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
  return (
    <CreateForm
      label="New subscriber"
      error={errors.general}
      submitLabel="Create subscriber"
      pending={create.isPending}
      onSubmit={() => create.mutate()}
      onCancel={onDone}
    >
      <TextField
        label="Subscriber id"
        value={id}
        onChange={setId}
        error={errors.of('subscriber_id')}
        hint="Your own id for this customer: letters, digits and _ . : @ + -."
        placeholder="acct_42"
      />
      <TextField
        label="Subscriber name"
        value={name}
        onChange={setName}
        error={errors.of('name')}
        placeholder="Acme Inc."
      />
    </CreateForm>
  );
}
