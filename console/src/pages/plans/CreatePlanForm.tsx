import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { Feature, PlanKind } from '../../api/types.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
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

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const found = draftProblems(features, draft);
    setProblems(found);
    if (Object.keys(found).length === 0) create.mutate();
  };

  return (
    <form onSubmit={submit} className="panel form" aria-label="New plan" noValidate>
      <ErrorNotice error={errors.general} />
      <div className="form-grid">
        <Field
          label="Plan key"
          error={errors.of('key')}
          hint="Lowercase letters, digits, _ and -; at most 64; fixed once created."
        >
          {(props) => (
            <input {...props} value={key} onChange={(e) => setKey(e.target.value)} placeholder="pro" />
          )}
        </Field>
        <Field label="Plan name" error={errors.of('name')}>
          {(props) => (
            <input {...props} value={name} onChange={(e) => setName(e.target.value)} placeholder="Pro" />
          )}
        </Field>
        <Field
          label="Plan kind"
          error={errors.of('kind')}
          hint="catalog: offered to everyone; custom: for one arrangement."
        >
          {(props) => (
            <select {...props} value={kind} onChange={(e) => setKind(e.target.value as PlanKind)}>
              <option value="catalog">catalog</option>
              <option value="custom">custom</option>
            </select>
          )}
        </Field>
      </div>
      <h3>Grants</h3>
      <GrantsEditor
        features={features}
        draft={draft}
        problems={problems}
        onChange={setDraft}
        planLabel="the new plan"
      />
      <div className="form-actions">
        <button type="submit" className="button button-primary" disabled={create.isPending}>
          Create plan
        </button>
        <button type="button" className="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
