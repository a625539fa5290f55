import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { catalogApi } from '../../api/catalog.ts';
import type { Feature, Plan } from '../../api/types.ts';
import { useCatalogWritten } from '../catalog-written.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { GrantsEditor } from './GrantsEditor.tsx';
import { draftOf, draftProblems, grantsOf, type GrantDraft } from './grant-draft.ts';
import { PLANS_KEY } from './queries.ts';

/** A plan's grants edited in place; saving replaces the whole list (PATCH with `grants`). */
export function PlanGrantsForm({
  plan,
  features,
  onDone,
}: {
  plan: Plan;
  features: readonly Feature[];
  onDone: () => void;
}) {
  const catalogWritten = useCatalogWritten(PLANS_KEY);
  const [draft, setDraft] = useState<GrantDraft>(() => draftOf(features, plan.grants));
  const [problems, setProblems] = useState<Record<string, string>>({});
  const save = useMutation({
    mutationFn: () => catalogApi.updatePlan(plan.key, { grants: grantsOf(features, draft) }),
    onSuccess: async () => {
      await catalogWritten();
      onDone();
    },
  });
  const submit = () => {
    const found = draftProblems(features, draft);
    setProblems(found);
    if (Object.keys(found).length === 0) save.mutate();
  };
  return (
    <div className="grants-form" data-testid={`grants-form-${plan.key}`}>
      <ErrorNotice error={save.error} />
      <GrantsEditor
        features={features}
        draft={draft}
        problems={problems}
        onChange={setDraft}
        planLabel={plan.key}
      />
      <div className="form-actions">
        <button
          type="button"
          className="button button-primary button-small"
          disabled={save.isPending}
          onClick={submit}
        >
          Save grants
        </button>
        <button type="button" className="button button-small" onClick={onDone}>
          Cancel
        </button>
      </div>
    </div>
  );
}
