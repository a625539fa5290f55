import type { Role } from '../api/types.ts';
import { usePermissions } from '../auth/session.ts';
import { Field } from './Field.tsx';

/** A role to give (an invite's, a service account's): only roles this member may grant, never above theirs. */
export function RoleField({
  label,
  value,
  onChange,
  error,
  hint,
  inline,
}: {
  label: string;
  value: Role;
  onChange: (role: Role) => void;
  error?: string | undefined;
  hint?: string;
  inline?: boolean;
}) {
  const can = usePermissions();
  return (
    <Field label={label} error={error} hint={hint} inline={inline}>
      {(props) => (
        <select {...props} value={value} onChange={(e) => onChange(e.target.value as Role)}>
          {can.grantableRoles.map((role) => (
            <option key={role} value={role}>
              {role}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}
