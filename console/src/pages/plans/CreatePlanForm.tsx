import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { Feature, PlanKind } from '../../api/types.ts';
import { CreateForm } from '../../components/CreateForm.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SelectField } from '../../components/SelectField.tsx';
import { TextField } from '../../components/TextField.tsx';
import { GrantsEditor } from './GrantsEditor.tsx';
import { draftOf, draftProblems, grantsOf, type GrantDraft } from './grant-draft.ts';
import { PLANS_KEY } from './queries.ts';

export function CreatePlanForm({ features, onDone }: { features: readonly Feature[]; onDone: () => void }) {
  const queryClient = useQueryClient();
  const [key, setKey] = useState('');
  const [name, setName] = useState('');
  const [kind, setKind] = useState<PlanKind>('catalog');
  const [draft, setDraft] = useState<GrantDraft>(() => draftOf(features, []));
  const [problems, setProblems] = useState<Record<string, string>>({});
  const create = useMutation({
    mutationFn: () =>
      catalogApi.createPlan({ key: key.trim(), name: name.trim(), kind, grants: grantsOf(features, draft) }),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: PLANS_KEY });
      onDone();
    },
  });
  const errors = formErrors(create.error, ['key', 'name', 'kind']);

  const submit = () => {
    const found = draftProblems(features, draft);
    setProblems(found);
    if (Object.keys(found).length === 0) create.mutate();
  };

  return (
    <CreateForm
      label="New plan"
      className="panel form"
      error={errors.general}
      submitLabel="Create plan"
      pending={create.isPending}
      onSubmit={submit}
      onCancel={onDone}
    >
      <div className="form-grid">
        <TextField
          label="Plan key"
          value={key}
          onChange={setKey}
          error={errors.of('key')}
          hint="Lowercase letters, digits, _ and -; at most 64; fixed once created."
          placeholder="pro"
        />
        <TextField
          label="Plan name"
          value={name}
          onChange={setName}
          error={errors.of('name')}
          placeholder="Pro"
        />
        <SelectField
          label="Plan kind"
          error={errors.of('kind')}
          hint="catalog: offered to everyone; custom: for one arrangement."
          value={kind}
          onChange={(value) => setKind(value as PlanKind)}
        >
          <option value="catalog">catalog</option>
          <option value="custom">custom</option>
        </SelectField>
      </div>
      <h3>Grants</h3>
      <GrantsEditor
        features={features}
        draft={draft}
        problems={problems}
        onChange={setDraft}
        planLabel="the new plan"
      />
    </CreateForm>
  );
}
