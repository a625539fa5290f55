import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import type { CreatedApiKey, Scope, ServiceAccount } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { CreateForm } from '../../components/CreateForm.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { TextField } from '../../components/TextField.tsx';
import { apiKeysKey } from './queries.ts';

/** SPEC 5.4: a new key defaults to `check`; no scopes at all is full access (everything the account's role allows). */
export function CreateApiKeyForm({
  account,
  onCreated,
  onCancel,
}: {
  account: ServiceAccount;
  onCreated: (key: CreatedApiKey) => void;
  onCancel: () => void;
}) {
  const can = usePermissions();
  const queryClient = useQueryClient();
  const offered = can.keyScopesFor(account.role);
  const [name, setName] = useState('');
  const [fullAccess, setFullAccess] = useState(false);
  const [scopes, setScopes] = useState<Scope[]>(['check']);
  const [scopeError, setScopeError] = useState<string | undefined>();
  const create = useMutation({
    mutationFn: () =>
      accessApi.createApiKey(account.service_account_id, {
        ...(name.trim() ? { name: name.trim() } : {}),
        scopes: fullAccess ? [] : scopes,
      }),
    onSuccess: async (key) => {
      await queryClient.invalidateQueries({ queryKey: apiKeysKey(account.service_account_id) });
      onCreated(key);
    },
  });
  const errors = formErrors(create.error, ['name', 'scopes']);
  const toggle = (scope: Scope, on: boolean) =>
    setScopes((current) => (on ? [...current, scope] : current.filter((s) => s !== scope)));
  const submit = () => {
    const problem =
      !fullAccess && scopes.length === 0 ? 'Choose at least one scope, or full access.' : undefined;
    setScopeError(problem);
    if (!problem) create.mutate();
  };

  return (
    <CreateForm
      label={`New key for ${account.name}`}
      className="form key-form"
      error={errors.general}
      submitLabel="Create key"
      pending={create.isPending}
      small
      onSubmit={submit}
      onCancel={onCancel}
    >
      <TextField
        label="Key name"
        value={name}
        onChange={setName}
        error={errors.of('name')}
        placeholder="production"
      />
      <fieldset className="scopes" aria-invalid={Boolean(scopeError ?? errors.of('scopes'))}>
        <legend>Scopes</legend>
        <label className="checkbox">
          <input type="checkbox" checked={fullAccess} onChange={(e) => setFullAccess(e.target.checked)} />{' '}
          Full access (everything the {account.role} role allows, now and later)
        </label>
        {offered.map((scope) => (
          <label key={scope} className="checkbox">
            <input
              type="checkbox"
              disabled={fullAccess}
              checked={fullAccess || scopes.includes(scope)}
              onChange={(e) => toggle(scope, e.target.checked)}
            />{' '}
            {scope}
          </label>
        ))}
        {(scopeError ?? errors.of('scopes')) ? (
          <small className="field-error">{scopeError ?? errors.of('scopes')}</small>
        ) : null}
      </fieldset>
    </CreateForm>
  );
}
