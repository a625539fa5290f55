import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import { ROLES, type Member, type MemberStatus, type Role } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorRow } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { MEMBERS_KEY } from './queries.ts';

const STATUS_TONE = { active: 'good', suspended: 'warn', removed: 'bad' } as const;

export function MemberRow({ member, self }: { member: Member; self: boolean }) {
  const can = usePermissions();
  const queryClient = useQueryClient();
  const [role, setRole] = useState<Role>(member.role);
  const update = useMutation({
    mutationFn: (input: { role?: Role; status?: MemberStatus }) =>
      accessApi.updateMember(member.member_id, input),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: MEMBERS_KEY }),
  });
  const label = member.email ?? member.name ?? member.member_id;
  // Nobody changes their own role or status here: it could leave the organization without an admin.
  const manage = can.manageMembers && !self && member.status !== 'removed';
  return (
    <>
      <tr data-testid={`member-${member.email ?? member.member_id}`}>
        <td>
          {member.email ?? '—'} {self ? <Badge>you</Badge> : null}
        </td>
        <td>{member.name ?? <span className="cell-muted">—</span>}</td>
        <td>
          {manage ? (
            <span className="inline-form">
              <select
                aria-label={`Role of ${label}`}
                value={role}
                onChange={(e) => setRole(e.target.value as Role)}
              >
                {ROLES.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
              <button
                type="button"
                className="button button-small"
                disabled={role === member.role || update.isPending}
                onClick={() => update.mutate({ role })}
              >
                Save role
              </button>
            </span>
          ) : (
            <Badge tone="info">{member.role}</Badge>
          )}
        </td>
        <td>
          <Badge tone={STATUS_TONE[member.status]}>{member.status}</Badge>
        </td>
        <td className="cell-nowrap">{formatTime(member.created_at)}</td>
        {can.manageMembers ? (
          <td className="cell-actions">
            {manage && member.status === 'active' ? (
              <ConfirmButton
                label="Suspend"
                confirmLabel="Confirm suspend"
                pending={update.isPending}
                onConfirm={() => update.mutate({ status: 'suspended' })}
              />
            ) : null}
            {manage && member.status === 'suspended' ? (
              <button
                type="button"
                className="button button-small"
                disabled={update.isPending}
                onClick={() => update.mutate({ status: 'active' })}
              >
                Reactivate
              </button>
            ) : null}
          </td>
        ) : null}
      </tr>
      <ErrorRow error={update.error} columns={6} />
    </>
  );
}
