import type { FormEvent, ReactNode } from 'react';
import { ErrorNotice } from './ErrorNotice.tsx';
import { SubmitButton } from './SubmitButton.tsx';

/**
 * The frame every "New …" form shares: the error no input claims on top, the inputs, then the create and
 * Cancel buttons. `onSubmit` runs once the browser's own submit is stopped (it may check inputs first).
 */
export function CreateForm({
  label,
  className = 'panel form form-grid',
  error,
  submitLabel,
  pending,
  small,
  onSubmit,
  onCancel,
  children,
}: {
  /** The form's accessible name ("New feature"). */
  label: string;
  className?: string;
  error: unknown;
  submitLabel: string;
  pending: boolean;
  small?: boolean;
  onSubmit: () => void;
  onCancel: () => void;
  children: ReactNode;
}) {
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onSubmit();
  };
  return (
    <form onSubmit={submit} className={className} aria-label={label} noValidate>
      <ErrorNotice error={error} />
      {children}
      <div className="form-actions">
        <SubmitButton label={submitLabel} pending={pending} small={small} />
        <button type="button" className={small ? 'button button-small' : 'button'} onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
