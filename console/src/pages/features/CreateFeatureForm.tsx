import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { FeatureKind } from '../../api/types.ts';
import { CreateForm } from '../../components/CreateForm.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SelectField } from '../../components/SelectField.tsx';
import { TextField } from '../../components/TextField.tsx';
import { useCatalogWritten } from '../catalog-written.ts';
import { FEATURES_KEY } from './queries.ts';

export function CreateFeatureForm({ onDone }: { onDone: () => void }) {
  const catalogWritten = useCatalogWritten(FEATURES_KEY);
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
      await catalogWritten();
      onDone();
    },
  });
  const errors = formErrors(create.error, ['key', 'name', 'kind', 'description']);

  return (
    <CreateForm
      label="New feature"
      error={errors.general}
      submitLabel="Create feature"
      pending={create.isPending}
      onSubmit={() => create.mutate()}
      onCancel={onDone}
    >
      <TextField
        label="Feature key"
        value={key}
        onChange={setKey}
        error={errors.of('key')}
        hint="Lowercase letters, digits and _ . : -; at most 64."
        placeholder="api_access"
      />
      <TextField
        label="Feature name"
        value={name}
        onChange={setName}
        error={errors.of('name')}
        placeholder="API access"
      />
      <SelectField
        label="Kind"
        error={errors.of('kind')}
        value={kind}
        onChange={(value) => setKind(value as FeatureKind)}
      >
        <option value="flag">flag: on or off</option>
        <option value="limit">limit: a number, or unlimited</option>
        <option value="metered">metered: a limit on use, counted per period</option>
      </SelectField>
      <TextField
        label="Description"
        value={description}
        onChange={setDescription}
        error={errors.of('description')}
      />
    </CreateForm>
  );
}
