import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { sessionApi } from '../../api/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { AuthFrame } from './AuthFrame.tsx';
import { passwordProblem } from './password-rules.ts';
import { useSignedIn } from './use-signed-in.ts';

const FIELDS = ['email', 'password', 'name', 'organization.name', 'organization.slug'] as const;

/** Lowercase letters, digits and dashes, as the organization slug rule asks. */
const slugOf = (name: string) =>
  name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63);

export function SignUpPage() {
  const signedIn = useSignedIn();
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [orgName, setOrgName] = useState('');
  const [slug, setSlug] = useState('');
  const [slugEdited, setSlugEdited] = useState(false);
  const [tooShort, setTooShort] = useState<string | undefined>();
  const signUp = useMutation({ mutationFn: sessionApi.signUp, onSuccess: signedIn });
  const errors = formErrors(signUp.error, FIELDS);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const problem = passwordProblem(password);
    setTooShort(problem);
    if (problem) return;
    signUp.mutate({
      email,
      password,
      ...(name.trim() ? { name: name.trim() } : {}),
      organization: { name: orgName.trim(), slug },
    });
  };

  return (
    <AuthFrame
      title="Create your organization"
      footer={
        <>
          Already have an account? <Link to="/sign-in">Sign in</Link>
        </>
      }
    >
      <form onSubmit={submit} className="form" noValidate>
        <ErrorNotice error={errors.general} />
        <Field label="Your name" error={errors.of('name')}>
          {(props) => (
            <input {...props} value={name} onChange={(e) => setName(e.target.value)} autoComplete="name" />
          )}
        </Field>
        <Field label="Email" error={errors.of('email')}>
          {(props) => (
            <input
              {...props}
              type="email"
              required
              value={email}
              onChange={(e) => setEmail(e.target.value)}
              autoComplete="email"
            />
          )}
        </Field>
        <Field label="Password" error={tooShort ?? errors.of('password')} hint="10 to 200 characters.">
          {(props) => (
            <input
              {...props}
              type="password"
              required
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              autoComplete="new-password"
            />
          )}
        </Field>
        <Field label="Organization name" error={errors.of('organization.name')}>
          {(props) => (
            <input
              {...props}
              required
              value={orgName}
              onChange={(e) => {
                setOrgName(e.target.value);
                if (!slugEdited) setSlug(slugOf(e.target.value));
              }}
              autoComplete="organization"
            />
          )}
        </Field>
        <Field
          label="Organization slug"
          error={errors.of('organization.slug')}
          hint="Lowercase letters, digits and dashes; you sign in with it."
        >
          {(props) => (
            <input
              {...props}
              required
              value={slug}
              onChange={(e) => {
                setSlug(e.target.value);
                setSlugEdited(true);
              }}
            />
          )}
        </Field>
        <button type="submit" className="button button-primary" disabled={signUp.isPending}>
          {signUp.isPending ? 'Creating…' : 'Create organization'}
        </button>
      </form>
    </AuthFrame>
  );
}
