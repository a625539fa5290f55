import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link } from 'react-router';
import { sessionApi } from '../../api/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { AuthFrame } from './AuthFrame.tsx';
import { EmailField, NameField, NewPasswordField } from './fields.tsx';
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
        <NameField value={name} onChange={setName} error={errors.of('name')} />
        <EmailField value={email} onChange={setEmail} error={errors.of('email')} />
        <NewPasswordField
          required
          value={password}
          onChange={setPassword}
          error={tooShort ?? errors.of('password')}
        />
        <TextField
          label="Organization name"
          required
          autoComplete="organization"
          value={orgName}
          onChange={(value) => {
            setOrgName(value);
            if (!slugEdited) setSlug(slugOf(value));
          }}
          error={errors.of('organization.name')}
        />
        <TextField
          label="Organization slug"
          required
          value={slug}
          onChange={(value) => {
            setSlug(value);
            setSlugEdited(true);
          }}
          error={errors.of('organization.slug')}
          hint="Lowercase letters, digits and dashes; you sign in with it."
        />
        <SubmitButton label="Create organization" pending={signUp.isPending} pendingLabel="Creating…" />
      </form>
    </AuthFrame>
  );
}
