import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { accessApi } from '../../api/access.ts';
import { ROLES, ROLE_RANK, type Member, type MemberStatus, type Role } from '../../api/types.ts';
import { usePermissions } from '../../auth/session.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorRow } from '../../components/DataTable.tsx';
import { formatTime } from '../../components/format.ts';
import { MEMBERS_KEY } from './queries.ts';
import { MintedKeysConfirm, mintedKeysKey } from './MintedKeysConfirm.tsx';

const STATUS_TONE = { active: 'good', suspended: 'warn', removed: 'bad' } as const;

export function MemberRow({ member, self }: { member: Member; self: boolean }) {
  const can = usePermissions();
  const queryClient = useQueryClient();
  const [role, setRole] = useState<Role>(member.role);
  // A removal or a demotion revokes the keys the member minted: it is confirmed with those keys in view.
  const [confirming, setConfirming] = useState<'remove' | 'demote' | null>(null);
  const update = useMutation({
    mutationFn: (input: { role?: Role; status?: MemberStatus; revoke_minted_keys?: boolean }) =>
      accessApi.updateMember(member.member_id, input),
    onSuccess: async () => {
      setConfirming(null);
      await queryClient.invalidateQueries({ queryKey: MEMBERS_KEY });
      await queryClient.invalidateQueries({ queryKey: mintedKeysKey(member.member_id) });
    },
  });
  const saveRole = () =>
    ROLE_RANK[role] < ROLE_RANK[member.role] ? setConfirming('demote') : update.mutate({ role });
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
                disabled={role === member.role || update.isPending || confirming !== null}
                onClick={saveRole}
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
            {manage ? (
              <button
                type="button"
                className="button button-small button-danger-quiet"
                disabled={update.isPending || confirming !== null}
                onClick={() => setConfirming('remove')}
              >
                Remove
              </button>
            ) : null}
          </td>
        ) : null}
      </tr>
      {confirming ? (
        <MintedKeysConfirm
          member={member}
          action={confirming === 'remove' ? 'remove member' : `change role to ${role}`}
          columns={6}
          pending={update.isPending}
          onCancel={() => setConfirming(null)}
          onConfirm={(revokeMintedKeys) =>
            update.mutate(
              confirming === 'remove'
                ? { status: 'removed', revoke_minted_keys: revokeMintedKeys }
                : { role, revoke_minted_keys: revokeMintedKeys },
            )
          }
        />
      ) : null}
      <ErrorRow error={update.error} columns={6} />
    </>
  );
}
