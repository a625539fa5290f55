import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useParams } from 'react-router';
import { isApiError } from '../../api/errors.ts';
import { sessionApi } from '../../api/session.ts';
import type { InvitePreview, InviteStatus } from '../../api/types.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { formatTime } from '../../components/format.ts';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { AuthFrame } from './AuthFrame.tsx';
import { EmailField, NameField, NewPasswordField } from './fields.tsx';
import { passwordProblem } from './password-rules.ts';
import { useSignedIn } from './use-signed-in.ts';

const ENDED: Record<Exclude<InviteStatus, 'pending'>, string> = {
  accepted: 'This invite has already been used. Sign in with the account it created.',
  expired: 'This invite has expired. Ask an admin of the organization for a new one.',
  revoked: 'This invite was revoked. Ask an admin of the organization for a new one.',
};

export function JoinPage() {
  const { token = '' } = useParams();
  const invite = useQuery({
    queryKey: ['invite', token],
    queryFn: () => sessionApi.invite(token),
    retry: false,
  });

  if (invite.isPending)
    return (
      <AuthFrame title="Join an organization">
        <p className="loading">Checking the invite…</p>
      </AuthFrame>
    );
  if (invite.isError) {
    const unknown = isApiError(invite.error) && invite.error.status === 404;
    return (
      <AuthFrame title="Join an organization" footer={<Link to="/sign-in">Sign in</Link>}>
        {unknown ? (
          <div className="notice notice-error" role="alert" data-testid="invite-status">
            This invite link is not valid. Check that you copied the whole link, or ask for a new invite.
          </div>
        ) : (
          <ErrorNotice error={invite.error} />
        )}
      </AuthFrame>
    );
  }
  const preview = invite.data;
  if (preview.status !== 'pending') {
    return (
      <AuthFrame title={`Join ${preview.organization.name}`} footer={<Link to="/sign-in">Sign in</Link>}>
        <div className="notice notice-error" role="alert" data-testid="invite-status">
          {ENDED[preview.status]}
        </div>
      </AuthFrame>
    );
  }
  return <AcceptForm token={token} preview={preview} />;
}

function AcceptForm({ token, preview }: { token: string; preview: InvitePreview }) {
  const signedIn = useSignedIn();
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [passwordError, setPasswordError] = useState<string | undefined>();
  const accept = useMutation({
    mutationFn: () =>
      sessionApi.acceptInvite(token, {
        password,
        ...(name.trim() ? { name: name.trim() } : {}),
        ...(preview.email === null ? { email: email.trim() } : {}),
      }),
    onSuccess: signedIn,
  });
  const errors = formErrors(accept.error, ['email', 'name', 'password']);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const problem = passwordProblem(password);
    setPasswordError(problem);
    if (!problem) accept.mutate();
  };

  return (
    <AuthFrame title={`Join ${preview.organization.name}`}>
      <p className="auth-lead" data-testid="invite-status">
        You are invited as <strong>{preview.role}</strong> of <strong>{preview.organization.name}</strong> (
        {preview.organization.slug}). The invite expires {formatTime(preview.expires_at)}.
      </p>
      <form onSubmit={submit} className="form" noValidate>
        <ErrorNotice error={errors.general} />
        {preview.email === null ? (
          <EmailField value={email} onChange={setEmail} error={errors.of('email')} />
        ) : (
          <p>
            Email: <strong>{preview.email}</strong>
          </p>
        )}
        <NameField value={name} onChange={setName} error={errors.of('name')} />
        <NewPasswordField
          required
          value={password}
          onChange={setPassword}
          error={passwordError ?? errors.of('password')}
        />
        <SubmitButton label="Accept invite" pending={accept.isPending} pendingLabel="Joining…" />
      </form>
    </AuthFrame>
  );
}
