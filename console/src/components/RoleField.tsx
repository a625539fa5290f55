import type { Role } from '../api/types.ts';
import { usePermissions } from '../auth/session.ts';
import { SelectField, type SelectFieldProps } from './SelectField.tsx';

/** A role to give (an invite's, a service account's): only roles this member may grant, never above theirs. */
export function RoleField({
  onChange,
  ...field
}: Omit<SelectFieldProps, 'value' | 'onChange' | 'children'> & {
  value: Role;
  onChange: (role: Role) => void;
}) {
  const can = usePermissions();
  return (
    <SelectField {...field} onChange={(value) => onChange(value as Role)}>
      {can.grantableRoles.map((role) => (
        <option key={role} value={role}>
          {role}
        </option>
      ))}
    </SelectField>
  );
}
