import type { InputHTMLAttributes } from 'react';
import { Field, type FieldFrame } from './Field.tsx';

/** What the caller sets on the input itself; Field owns its id and aria wiring, TextField its value. */
type InputAttributes = Omit<InputHTMLAttributes<HTMLInputElement>, 'id' | 'value' | 'onChange' | 'children'>;

export interface TextFieldProps extends InputAttributes, FieldFrame {
  value: string;
  onChange: (value: string) => void;
}

/** A labelled input whose value is a string (text, email, password, url, search…) held by the caller. */
export function TextField({ label, error, hint, inline, value, onChange, ...input }: TextFieldProps) {
  return (
    <Field label={label} error={error} hint={hint} inline={inline}>
      {(wiring) => <input {...input} {...wiring} value={value} onChange={(e) => onChange(e.target.value)} />}
    </Field>
  );
}
