import { useState } from 'react';

/** A destructive action asked twice, inline: the first click shows "Confirm" and "Cancel". */
export function ConfirmButton({
  label,
  confirmLabel,
  onConfirm,
  disabled,
  pending,
}: {
  label: string;
  confirmLabel?: string;
  onConfirm: () => void;
  disabled?: boolean;
  pending?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  if (pending) {
    return (
      <button type="button" className="button button-small" disabled>
        Working…
      </button>
    );
  }
  if (!asking) {
    return (
      <button
        type="button"
        className="button button-small button-danger-quiet"
        disabled={disabled}
        onClick={() => setAsking(true)}
      >
        {label}
      </button>
    );
  }
  return (
    <span className="confirm">
      <button
        type="button"
        className="button button-small button-danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel ?? `Confirm ${label.toLowerCase()}`}
      </button>
      <button type="button" className="button button-small" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}
