import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { sessionApi } from '../../api/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { Field } from '../../components/Field.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { passwordProblem } from '../auth/password-rules.ts';

export function PasswordForm() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [localErrors, setLocalErrors] = useState<{ next?: string; repeat?: string }>({});
  const change = useMutation({
    mutationFn: () => sessionApi.changePassword({ current_password: current, new_password: next }),
    onSuccess: () => {
      setCurrent('');
      setNext('');
      setRepeat('');
    },
  });
  const errors = formErrors(change.error, ['current_password', 'new_password']);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const problems = {
      ...(passwordProblem(next) ? { next: passwordProblem(next) } : {}),
      ...(next !== repeat ? { repeat: 'The two new passwords differ.' } : {}),
    };
    setLocalErrors(problems);
    if (Object.keys(problems).length === 0) change.mutate();
  };

  return (
    <section className="panel">
      <h2>Password</h2>
      <form onSubmit={submit} className="form form-narrow" noValidate>
        <ErrorNotice error={errors.general} />
        {change.isSuccess ? (
          <div className="notice notice-success" role="status">
            Password changed. Your other sessions have been signed out.
          </div>
        ) : null}
        <Field label="Current password" error={errors.of('current_password')}>
          {(props) => (
            <input
              {...props}
              type="password"
              value={current}
              onChange={(e) => setCurrent(e.target.value)}
              autoComplete="current-password"
            />
          )}
        </Field>
        <Field
          label="New password"
          error={localErrors.next ?? errors.of('new_password')}
          hint="10 to 200 characters."
        >
          {(props) => (
            <input
              {...props}
              type="password"
              value={next}
              onChange={(e) => setNext(e.target.value)}
              autoComplete="new-password"
            />
          )}
        </Field>
        <Field label="Repeat new password" error={localErrors.repeat}>
          {(props) => (
            <input
              {...props}
              type="password"
              value={repeat}
              onChange={(e) => setRepeat(e.target.value)}
              autoComplete="new-password"
            />
          )}
        </Field>
        <button type="submit" className="button button-primary" disabled={change.isPending}>
          Change password
        </button>
      </form>
    </section>
  );
}
