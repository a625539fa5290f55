/** A form's primary button: disabled while its request runs, and saying `pendingLabel` then when given. */
export function SubmitButton({
  label,
  pending,
  pendingLabel,
  disabled,
  small,
}: {
  label: string;
  pending: boolean;
  pendingLabel?: string;
  /** Another reason not to submit yet (nothing chosen, a wait after too many attempts). */
  disabled?: boolean;
  small?: boolean;
}) {
  return (
    <button
      type="submit"
      className={`button button-primary${small ? ' button-small' : ''}`}
      disabled={pending || disabled}
    >
      {pending && pendingLabel ? pendingLabel : label}
    </button>
  );
}
