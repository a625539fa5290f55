import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { isApiError } from '../../api/errors.ts';
import { sessionApi } from '../../api/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { AuthFrame } from './AuthFrame.tsx';
import { CurrentPasswordField, EmailField } from './fields.tsx';
import { useCountdown } from './use-countdown.ts';
import { useSignedIn } from './use-signed-in.ts';

export function SignInPage() {
  const signedIn = useSignedIn();
  const [organization, setOrganization] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [blockedUntil, setBlockedUntil] = useState<number | null>(null);
  const secondsLeft = useCountdown(blockedUntil);
  const signIn = useMutation({
    mutationFn: sessionApi.signIn,
    onSuccess: signedIn,
    onError: (error) => {
      if (isApiError(error) && error.status === 429)
        setBlockedUntil(Date.now() + (error.retryAfter ?? 60) * 1000);
    },
  });
  const rateLimited = isApiError(signIn.error) && signIn.error.status === 429;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate({ organization: organization.trim(), email: email.trim(), password });
  };

  return (
    <AuthFrame
      title="Sign in"
      footer={
        <>
          New here? <Link to="/sign-up">Create an organization</Link>
        </>
      }
    >
      <form onSubmit={submit} className="form" noValidate>
        {rateLimited ? (
          <div className="notice notice-error" role="alert" data-testid="rate-limited">
            Too many failed sign-ins.{' '}
            {secondsLeft > 0 ? `Try again in ${secondsLeft} s.` : 'You may try again now.'}
          </div>
        ) : (
          <ErrorNotice error={signIn.error} />
        )}
        <TextField
          label="Organization slug"
          required
          autoComplete="organization"
          value={organization}
          onChange={setOrganization}
        />
        <EmailField autoComplete="username" value={email} onChange={setEmail} />
        <CurrentPasswordField required value={password} onChange={setPassword} />
        <SubmitButton
          label="Sign in"
          pending={signIn.isPending}
          pendingLabel="Signing in…"
          disabled={rateLimited && secondsLeft > 0}
        />
      </form>
    </AuthFrame>
  );
}
