import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { sessionApi } from '../../api/session.ts';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formErrors } from '../../components/form-errors.ts';
import { SubmitButton } from '../../components/SubmitButton.tsx';
import { TextField } from '../../components/TextField.tsx';
import { CurrentPasswordField, NewPasswordField } from '../auth/fields.tsx';
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
        <CurrentPasswordField
          label="Current password"
          value={current}
          onChange={setCurrent}
          error={errors.of('current_password')}
        />
        <NewPasswordField
          label="New password"
          value={next}
          onChange={setNext}
          error={localErrors.next ?? errors.of('new_password')}
        />
        <TextField
          label="Repeat new password"
          type="password"
          autoComplete="new-password"
          value={repeat}
          onChange={setRepeat}
          error={localErrors.repeat}
        />
        <SubmitButton label="Change password" pending={change.isPending} />
      </form>
    </section>
  );
}
