import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { accessApi } from '../../api/access.ts';
import type { Role } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SERVICE_ACCOUNTS_KEY } from './queries.ts';

export function CreateServiceAccountForm({ onDone }: { onDone: () => void }) {
  const can = usePermissions();
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>(can.grantableRoles.includes('developer') ? 'developer' : 'viewer');
  const create = useMutation({
    mutationFn: () => accessApi.createServiceAccount({ name: name.trim(), role }),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: SERVICE_ACCOUNTS_KEY });
      onDone();
    },
  });
  const errors = formErrors(create.error, ['name', 'role']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  return (
    <form className="panel form form-grid" onSubmit={submit} aria-label="New service account" noValidate>
      <ErrorNotice error={errors.general} />
      <Field label="Service account name" error={errors.of('name')}>
        {(props) => (
          <input
            {...props}
            value={name}
            onChange={(e) => setName(e.target.value)}
            placeholder="billing backend"
          />
        )}
      </Field>
      <Field
        label="Service account role"
        error={errors.of('role')}
        hint="Its keys never hold more than this role allows."
      >
        {(props) => (
          <select {...props} value={role} onChange={(e) => setRole(e.target.value as Role)}>
            {can.grantableRoles.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        )}
      </Field>
      <div className="form-actions">
        <button type="submit" className="button button-primary" disabled={create.isPending}>
          Create service account
        </button>
        <button type="button" className="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
