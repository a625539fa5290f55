import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { accessApi } from '../../api/access.ts';
import type { Invite, Role } from '../../api/types.ts';
import { Badge } from '../../components/Badge.tsx';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { CopyButton } from '../../components/CopyButton.tsx';
import { DataTable } from '../../components/DataTable.tsx';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { formatTime } from '../../components/format.ts';
import { QueryState } from '../../components/Loading.tsx';
import { RoleField } from '../../components/RoleField.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { INVITES_KEY } from './queries.ts';

/** Invites are admin-only (reading them is audited: each link lets anyone join with its role). */
export function InvitesPanel() {
  const queryClient = useQueryClient();
  const invites = useQuery({ queryKey: INVITES_KEY, queryFn: accessApi.invites });
  const [role, setRole] = useState<Role>('viewer');
  const [email, setEmail] = useState('');
  const [created, setCreated] = useState<Invite | null>(null);
  const create = useMutation({
    mutationFn: () => accessApi.createInvite({ role, ...(email.trim() ? { email: email.trim() } : {}) }),
    onSuccess: async (invite) => {
      setCreated(invite);
      setEmail('');
      await queryClient.invalidateQueries({ queryKey: INVITES_KEY });
    },
  });
  const revoke = useMutation({
    mutationFn: (inviteId: string) => accessApi.revokeInvite(inviteId),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: INVITES_KEY }),
  });
  const errors = formErrors(create.error, ['role', 'email']);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };

  return (
    <section className="panel" aria-labelledby="invites-title" data-testid="invites-panel">
      <h2 id="invites-title">Invites</h2>
      <form className="form inline-form" onSubmit={submit} aria-label="New invite" noValidate>
        <RoleField label="Invite role" value={role} onChange={setRole} error={errors.of('role')} inline />
        <TextField
          label="Invite email (optional)"
          type="email"
          value={email}
          onChange={setEmail}
          error={errors.of('email')}
          inline
          placeholder="anyone with the link"
        />
        <SubmitButton label="Create invite" pending={create.isPending} small />
      </form>
      <ErrorNotice error={errors.general} />
      {created ? (
        <div className="notice notice-success" role="status" data-testid="new-invite">
          <p>
            Invite created for a <strong>{created.role}</strong>. Send this link to the person joining; anyone
            holding it can join until {formatTime(created.expires_at)}.
          </p>
          <div className="secret-row">
            <code className="secret" data-testid="new-invite-link">
              {created.url}
            </code>
            <CopyButton text={created.url ?? ''} label="Copy link" />
            <button type="button" className="button button-small" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        </div>
      ) : null}
      <h3>Live invites</h3>
      <QueryState isPending={invites.isPending} error={invites.error} what="invites" />
      {invites.data ? (
        <DataTable
          compact
          columns={5}
          empty={invites.data.invites.length === 0 && 'No live invites.'}
          head={
            <>
              <th>Role</th>
              <th>Email</th>
              <th>Link</th>
              <th>Expires</th>
              <th aria-label="Actions" />
            </>
          }
        >
          {invites.data.invites.map((invite) => (
            <tr key={invite.invite_id} data-testid={`invite-${invite.invite_id}`}>
              <td>
                <Badge tone="info">{invite.role}</Badge>
              </td>
              <td>{invite.email ?? <span className="cell-muted">anyone with the link</span>}</td>
              <td>
                {invite.url ? (
                  <CopyButton text={invite.url} label="Copy link" />
                ) : (
                  <span className="cell-muted">only for those who may grant this role</span>
                )}
              </td>
              <td className="cell-nowrap">{formatTime(invite.expires_at)}</td>
              <td className="cell-actions">
                <ConfirmButton
                  label="Revoke"
                  confirmLabel="Confirm revoke"
                  pending={revoke.isPending && revoke.variables === invite.invite_id}
                  onConfirm={() => revoke.mutate(invite.invite_id)}
                />
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      <ErrorNotice error={revoke.error} />
    </section>
  );
}
