import { useId, type ReactNode } from 'react';

/** What frames an input: its label, hint and error, and whether it sits in a row of inputs. */
export interface FieldFrame {
  label: string;
  error?: string | undefined;
  hint?: string;
  inline?: boolean;
}

/** A labelled input with its hint and its inline error; `children` receives the ids to wire up. */
export function Field({
  label,
  error,
  hint,
  children,
  inline,
}: FieldFrame & {
  children: (props: { id: string; 'aria-describedby'?: string; 'aria-invalid'?: boolean }) => ReactNode;
}) {
  const id = useId();
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  const describedBy = [hint ? hintId : null, error ? errorId : null].filter(Boolean).join(' ');
  return (
    <div className={`field${inline ? ' field-inline' : ''}${error ? ' field-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      {children({
        id,
        ...(describedBy ? { 'aria-describedby': describedBy } : {}),
        ...(error ? { 'aria-invalid': true } : {}),
      })}
      {hint ? (
        <small id={hintId} className="field-hint">
          {hint}
        </small>
      ) : null}
      {error ? (
        <small id={errorId} className="field-error" role="alert">
          {error}
        </small>
      ) : null}
    </div>
  );
}
