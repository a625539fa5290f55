import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import type { CreateCreditBody } from '@ent/contract/credits';
import { subscribersApi } from '../../api/subscribers.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SelectField } from '../../components/SelectField.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { useFeatures } from '../features/queries.ts';

/** `datetime-local` is the user's local time without a zone; the API wants an ISO 8601 instant. */
const instantOf = (local: string): string | undefined => (local ? new Date(local).toISOString() : undefined);

const WHOLE = /^\d+$/;

/** POST a credit: a paid top-up, a promotional grant, on one metered feature. */
export function CreditForm({
  subscriberId,
  onSaved,
}: {
  subscriberId: string;
  onSaved: () => Promise<void>;
}) {
  const features = useFeatures();
  const [featureKey, setFeatureKey] = useState('');
  const [amount, setAmount] = useState('');
  const [name, setName] = useState('');
  const [priority, setPriority] = useState('');
  const [effective, setEffective] = useState('');
  const [expires, setExpires] = useState('');
  const [amountError, setAmountError] = useState<string | undefined>();
  const metered = (features.data?.items ?? []).filter((f) => f.kind === 'metered');
  const save = useMutation({
    mutationFn: (body: CreateCreditBody) => subscribersApi.createCredit(subscriberId, body),
    onSuccess: async () => {
      setAmount('');
      setName('');
      setPriority('');
      setEffective('');
      setExpires('');
      await onSaved();
    },
  });
  const errors = formErrors(save.error, [
    'feature',
    'amount',
    'name',
    'priority',
    'effective_at',
    'expires_at',
  ]);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const problem =
      WHOLE.test(amount.trim()) && Number(amount.trim()) > 0 ? undefined : 'A whole number above 0.';
    setAmountError(problem);
    if (problem || !featureKey) return;
    const effective_at = instantOf(effective);
    const expires_at = instantOf(expires);
    save.mutate({
      feature: featureKey,
      amount: Number(amount.trim()),
      ...(name.trim() ? { name: name.trim() } : {}),
      ...(WHOLE.test(priority.trim()) ? { priority: Number(priority.trim()) } : {}),
      ...(effective_at ? { effective_at } : {}),
      ...(expires_at ? { expires_at } : {}),
    });
  };

  return (
    <form className="form override-form" onSubmit={submit} aria-label="Add a credit" noValidate>
      <h3>Add a credit</h3>
      <ErrorNotice error={errors.general} />
      <div className="form-grid">
        <SelectField
          label="Credit feature"
          value={featureKey}
          onChange={setFeatureKey}
          error={errors.of('feature')}
        >
          <option value="">Choose a metered feature…</option>
          {metered.map((f) => (
            <option key={f.key} value={f.key}>
              {f.key}
            </option>
          ))}
        </SelectField>
        <TextField
          label="Amount"
          inputMode="numeric"
          value={amount}
          onChange={setAmount}
          error={amountError ?? errors.of('amount')}
          hint="In the feature's unit, on top of the allowance."
        />
        <TextField
          label="Name (optional)"
          value={name}
          onChange={setName}
          error={errors.of('name')}
          hint="E.g. the invoice of a paid top-up."
        />
        <TextField
          label="Priority (optional)"
          inputMode="numeric"
          value={priority}
          onChange={setPriority}
          error={errors.of('priority')}
          hint="1 to 100, 1 spent first; default 10."
        />
        <TextField
          label="Effective at (optional)"
          type="datetime-local"
          value={effective}
          onChange={setEffective}
          error={errors.of('effective_at')}
          hint="Your local time; empty = now."
        />
        <TextField
          label="Credit expires at (optional)"
          type="datetime-local"
          value={expires}
          onChange={setExpires}
          error={errors.of('expires_at')}
          hint="Your local time; empty = never."
        />
      </div>
      <div className="form-actions">
        <SubmitButton label="Add credit" pending={save.isPending} disabled={!featureKey} small />
      </div>
    </form>
  );
}
