import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import type { Role } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { CreateForm } from '../../components/CreateForm.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { RoleField } from '../../components/RoleField.tsx';
import { TextField } from '../../components/TextField.tsx';
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
  return (
    <CreateForm
      label="New service account"
      error={errors.general}
      submitLabel="Create service account"
      pending={create.isPending}
      onSubmit={() => create.mutate()}
      onCancel={onDone}
    >
      <TextField
        label="Service account name"
        value={name}
        onChange={setName}
        error={errors.of('name')}
        placeholder="billing backend"
      />
      <RoleField
        label="Service account role"
        value={role}
        onChange={setRole}
        error={errors.of('role')}
        hint="Its keys never hold more than this role allows."
      />
    </CreateForm>
  );
}
