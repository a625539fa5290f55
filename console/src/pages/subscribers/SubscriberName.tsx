import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { subscribersApi } from '../../api/subscribers.ts';
import type { Subscriber } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { useSubscriberChanged } from './queries.ts';

export function SubscriberName({ subscriber }: { subscriber: Subscriber }) {
  const can = usePermissions();
  // A name is admin's alone: no gateway read changes with it.
  const changed = useSubscriberChanged(subscriber.subscriber_id, []);
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(subscriber.name ?? '');
  const save = useMutation({
    mutationFn: () =>
      subscribersApi.update(subscriber.subscriber_id, { name: name.trim() ? name.trim() : null }),
    onSuccess: async () => {
      await changed();
      setEditing(false);
    },
  });
  const errors = formErrors(save.error, ['name']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };

  if (!editing) {
    return (
      <section className="panel panel-row">
        <span>
          Name: <strong data-testid="subscriber-name">{subscriber.name ?? '—'}</strong>
        </span>
        {can.writeSubscribers ? (
          <button type="button" className="button button-small" onClick={() => setEditing(true)}>
            Rename
          </button>
        ) : null}
      </section>
    );
  }
  return (
    <form className="panel form inline-form" onSubmit={submit} noValidate>
      <ErrorNotice error={errors.general} />
      <TextField label="Subscriber name" value={name} onChange={setName} error={errors.of('name')} inline />
      <SubmitButton label="Save name" pending={save.isPending} small />
      <button type="button" className="button button-small" onClick={() => setEditing(false)}>
        Cancel
      </button>
    </form>
  );
}
