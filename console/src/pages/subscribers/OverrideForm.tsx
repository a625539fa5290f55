import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { subscribersApi, type PutOverrideInput } from '../../api/subscribers.ts';
import type { Feature } from '../../api/types.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SelectField } from '../../components/SelectField.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { useFeatures } from '../features/queries.ts';

/** `datetime-local` is the user's local time without a zone; the API wants an ISO 8601 instant. */
const instantOf = (local: string): string | null => (local ? new Date(local).toISOString() : null);

function bodyOf(
  feature: Feature,
  allowed: boolean,
  unlimited: boolean,
  limit: string,
  expires: string,
): PutOverrideInput {
  const expires_at = instantOf(expires);
  return feature.kind === 'flag'
    ? { kind: 'flag', allowed, expires_at }
    : { kind: feature.kind, limit: unlimited ? null : Number(limit.trim()), expires_at };
}

/** PUT an override: creates one for the feature, or replaces the one it has. */
export function OverrideForm({
  subscriberId,
  onSaved,
}: {
  subscriberId: string;
  onSaved: () => Promise<void>;
}) {
  const features = useFeatures();
  const [featureKey, setFeatureKey] = useState('');
  const [allowed, setAllowed] = useState(true);
  const [unlimited, setUnlimited] = useState(false);
  const [limit, setLimit] = useState('');
  const [expires, setExpires] = useState('');
  const [limitError, setLimitError] = useState<string | undefined>();
  const catalog = features.data?.items ?? [];
  const feature = catalog.find((f) => f.key === featureKey);
  const save = useMutation({
    mutationFn: (body: PutOverrideInput) => subscribersApi.putOverride(subscriberId, featureKey, body),
    onSuccess: async () => {
      setFeatureKey('');
      setLimit('');
      setExpires('');
      await onSaved();
    },
  });
  const errors = formErrors(save.error, ['allowed', 'limit', 'expires_at', 'kind']);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!feature) return;
    const problem =
      feature.kind !== 'flag' && !unlimited && !/^\d+$/.test(limit.trim())
        ? 'A whole number of 0 or more, or unlimited.'
        : undefined;
    setLimitError(problem);
    if (!problem) save.mutate(bodyOf(feature, allowed, unlimited, limit, expires));
  };

  return (
    <form className="form override-form" onSubmit={submit} aria-label="Set an override" noValidate>
      <h3>Set an override</h3>
      <ErrorNotice error={errors.general} />
      <div className="form-grid">
        <SelectField label="Override feature" value={featureKey} onChange={setFeatureKey}>
          <option value="">Choose a feature…</option>
          {catalog.map((f) => (
            <option key={f.key} value={f.key}>
              {f.key} ({f.kind})
            </option>
          ))}
        </SelectField>
        {feature?.kind === 'flag' ? (
          <SelectField
            label="Override value"
            error={errors.of('allowed')}
            value={allowed ? 'allowed' : 'denied'}
            onChange={(value) => setAllowed(value === 'allowed')}
          >
            <option value="allowed">allowed</option>
            <option value="denied">denied</option>
          </SelectField>
        ) : null}
        {feature && feature.kind !== 'flag' ? (
          <Field
            label="Override limit"
            error={limitError ?? errors.of('limit')}
            hint={
              feature.kind === 'metered'
                ? "Per period; when it resets and whether it is soft stay the plan's."
                : undefined
            }
          >
            {(props) => (
              <span className="limit-input">
                <input
                  {...props}
                  inputMode="numeric"
                  disabled={unlimited}
                  value={unlimited ? '' : limit}
                  onChange={(e) => setLimit(e.target.value)}
                />
                <label className="checkbox">
                  <input
                    type="checkbox"
                    checked={unlimited}
                    onChange={(e) => setUnlimited(e.target.checked)}
                  />{' '}
                  unlimited
                </label>
              </span>
            )}
          </Field>
        ) : null}
        <TextField
          label="Expires at (optional)"
          type="datetime-local"
          value={expires}
          onChange={setExpires}
          error={errors.of('expires_at')}
          hint="Your local time; empty = never."
        />
      </div>
      <div className="form-actions">
        <SubmitButton label="Save override" pending={save.isPending} disabled={!feature} small />
      </div>
    </form>
  );
}
