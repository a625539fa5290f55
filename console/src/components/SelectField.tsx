import type { ReactNode, SelectHTMLAttributes } from 'react';
import { Field, type FieldFrame } from './Field.tsx';

/** What the caller sets on the select itself; Field owns its id and aria wiring, SelectField its value. */
type SelectAttributes = Omit<
  SelectHTMLAttributes<HTMLSelectElement>,
  'id' | 'value' | 'onChange' | 'children'
>;

export interface SelectFieldProps extends SelectAttributes, FieldFrame {
  value: string;
  onChange: (value: string) => void;
  /** The `<option>`s. */
  children: ReactNode;
}

/** A labelled select whose value (the chosen option's) is held by the caller. */
export function SelectField({
  label,
  error,
  hint,
  inline,
  value,
  onChange,
  children,
  ...select
}: SelectFieldProps) {
  return (
    <Field label={label} error={error} hint={hint} inline={inline}>
      {(wiring) => (
        <select {...select} {...wiring} value={value} onChange={(e) => onChange(e.target.value)}>
          {children}
        </select>
      )}
    </Field>
  );
}
