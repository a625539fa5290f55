import { useMutation } from '@tanstack/react-query';
import { useEditedFields } from '../../components/edited-fields.ts';
import { catalogApi } from '../../api/catalog.ts';
import type { Feature } from '../../api/types.ts';
import { ErrorRow } from '../../components/DataTable.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { useCatalogWritten } from '../catalog-written.ts';
import { FEATURES_KEY } from './queries.ts';

/** Name and description are the only fields of a feature that change (key and kind are fixed). */
export function EditFeatureRow({ feature, onDone }: { feature: Feature; onDone: () => void }) {
  const catalogWritten = useCatalogWritten(FEATURES_KEY);
  const fields = useEditedFields({ name: feature.name, description: feature.description });
  const save = useMutation({
    mutationFn: async () => {
      const changed = fields.changed();
      if (Object.keys(changed).length > 0) await catalogApi.updateFeature(feature.key, changed);
    },
    onSuccess: async () => {
      await catalogWritten();
      onDone();
    },
  });
  const errors = formErrors(save.error, ['name', 'description']);
  return (
    <>
      <tr className="row-editing">
        <td>
          <code>{feature.key}</code>
        </td>
        <td>
          <input
            aria-label={`Name of ${feature.key}`}
            aria-invalid={Boolean(errors.of('name'))}
            value={fields.valueOf('name')}
            onChange={(e) => fields.edit('name', e.target.value)}
          />
          {errors.of('name') ? <small className="field-error">{errors.of('name')}</small> : null}
        </td>
        <td>{feature.kind}</td>
        <td>
          <input
            aria-label={`Description of ${feature.key}`}
            value={fields.valueOf('description') ?? ''}
            onChange={(e) => fields.edit('description', e.target.value)}
          />
          {errors.of('description') ? (
            <small className="field-error">{errors.of('description')}</small>
          ) : null}
        </td>
        <td />
        <td className="cell-actions">
          <button
            type="button"
            className="button button-small button-primary"
            disabled={save.isPending}
            onClick={() => save.mutate()}
          >
            Save
          </button>
          <button type="button" className="button button-small" onClick={onDone}>
            Cancel
          </button>
        </td>
      </tr>
      <ErrorRow error={errors.general} columns={6} />
    </>
  );
}
