import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { isApiError } from '../../api/errors.ts';
import { isOrganizationChoice, sessionApi, type SignInInput } from '../../api/session.ts';
import type { OrganizationChoice } from '../../api/types.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { AuthFrame } from './AuthFrame.tsx';
import { CurrentPasswordField, EmailField } from './fields.tsx';
import { useCountdown } from './use-countdown.ts';
import { useSignedIn } from './use-signed-in.ts';

/**
 * Email and password only: a person does not know their organization's slug. When the password matches in several
 * organizations the service lists them, and signing in again naming the one picked opens it.
 */
export function SignInPage() {
  const signedIn = useSignedIn();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [choice, setChoice] = useState<OrganizationChoice['organizations'] | null>(null);
  const [blockedUntil, setBlockedUntil] = useState<number | null>(null);
  const secondsLeft = useCountdown(blockedUntil);
  const signIn = useMutation({
    mutationFn: (input: SignInInput) => sessionApi.signIn(input),
    onSuccess: (answer) =>
      isOrganizationChoice(answer) ? setChoice(answer.organizations) : signedIn(answer),
    onError: (error) => {
      if (!isApiError(error)) return;
      if (error.status === 429) setBlockedUntil(Date.now() + (error.retryAfter ?? 60) * 1000);
      // A wrong password is typed again from scratch (the field keeps nothing to edit by mistake), and a choice
      // made with it no longer stands.
      if (error.status === 401) {
        setPassword('');
        setChoice(null);
      }
    },
  });
  const rateLimited = isApiError(signIn.error) && signIn.error.status === 429;
  const notice = rateLimited ? (
    <div className="notice notice-error" role="alert" data-testid="rate-limited">
      Too many failed sign-ins.{' '}
      {secondsLeft > 0 ? `Try again in ${secondsLeft} s.` : 'You may try again now.'}
    </div>
  ) : (
    <ErrorNotice error={signIn.error} />
  );
  const footer = (
    <>
      New here? <Link to="/sign-up">Create an organization</Link>
    </>
  );

  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate({ email: email.trim(), password });
  };

  if (choice) {
    return (
      <AuthFrame title="Choose an organization" footer={footer}>
        {notice}
        <p className="auth-lead">
          {email.trim()} belongs to several organizations. Which one do you want to open?
        </p>
        <ul className="organization-choice" data-testid="organization-choice">
          {choice.map((organization) => (
            <li key={organization.slug}>
              <button
                type="button"
                className="button"
                disabled={signIn.isPending || (rateLimited && secondsLeft > 0)}
                onClick={() =>
                  signIn.mutate({ organization: organization.slug, email: email.trim(), password })
                }
              >
                {organization.name} <span className="cell-muted">({organization.slug})</span>
              </button>
            </li>
          ))}
        </ul>
        <button
          type="button"
          className="button button-small"
          onClick={() => {
            setChoice(null);
            setPassword('');
            signIn.reset();
          }}
        >
          Use another account
        </button>
      </AuthFrame>
    );
  }

  return (
    <AuthFrame title="Sign in" footer={footer}>
      <form onSubmit={submit} className="form" noValidate>
        {notice}
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
