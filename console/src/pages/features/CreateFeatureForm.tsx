import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { FeatureKind } from '../../api/types.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { FEATURES_KEY } from './queries.ts';

export function CreateFeatureForm({ onDone }: { onDone: () => void }) {
  const queryClient = useQueryClient();
  const [key, setKey] = useState('');
  const [name, setName] = useState('');
  const [kind, setKind] = useState<FeatureKind>('flag');
  const [description, setDescription] = useState('');
  const create = useMutation({
    mutationFn: () =>
      catalogApi.createFeature({
        key: key.trim(),
        name: name.trim(),
        kind,
        ...(description ? { description } : {}),
      }),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: FEATURES_KEY });
      onDone();
    },
  });
  const errors = formErrors(create.error, ['key', 'name', 'kind', 'description']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };

  return (
    <form onSubmit={submit} className="panel form form-grid" aria-label="New feature" noValidate>
      <ErrorNotice error={errors.general} />
      <Field
        label="Feature key"
        error={errors.of('key')}
        hint="Lowercase letters, digits and _ . : -; at most 64."
      >
        {(props) => (
          <input {...props} value={key} onChange={(e) => setKey(e.target.value)} placeholder="api_access" />
        )}
      </Field>
      <Field label="Feature name" error={errors.of('name')}>
        {(props) => (
          <input {...props} value={name} onChange={(e) => setName(e.target.value)} placeholder="API access" />
        )}
      </Field>
      <Field label="Kind" error={errors.of('kind')}>
        {(props) => (
          <select {...props} value={kind} onChange={(e) => setKind(e.target.value as FeatureKind)}>
            <option value="flag">flag: on or off</option>
            <option value="limit">limit: a number, or unlimited</option>
          </select>
        )}
      </Field>
      <Field label="Description" error={errors.of('description')}>
        {(props) => <input {...props} value={description} onChange={(e) => setDescription(e.target.value)} />}
      </Field>
      <div className="form-actions">
        <button type="submit" className="button button-primary" disabled={create.isPending}>
          Create feature
        </button>
        <button type="button" className="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
