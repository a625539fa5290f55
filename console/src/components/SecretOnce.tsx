import { CopyButton } from './CopyButton.tsx';

/** A secret the service shows once (a new API key, a webhook signing secret): copy it now or lose it. */
export function SecretOnce({
  label,
  secret,
  onDone,
  testId,
}: {
  label: string;
  secret: string;
  onDone: () => void;
  testId: string;
}) {
  return (
    <div className="notice notice-warning secret-once" role="status" data-testid={testId}>
      <p>
        <strong>{label}</strong> This is the only time it is shown: copy it now and store it somewhere safe.
        It cannot be displayed again.
      </p>
      <div className="secret-row">
        <code className="secret" data-testid={`${testId}-value`}>
          {secret}
        </code>
        <CopyButton text={secret} />
        <button type="button" className="button button-small" onClick={onDone}>
          I have stored it
        </button>
      </div>
    </div>
  );
}
