import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { subscribersApi } from '../../api/subscribers.ts';
import type { MeteredUsage } from '../../api/types.ts';
import { ConfirmButton } from '../../components/ConfirmButton.tsx';
import { ErrorNotice } from '../../components/ErrorNotice.tsx';
import { formatCount } from '../../components/format.ts';
import { TextField } from '../../components/TextField.tsx';
import { useSubscriberChanged } from './queries.ts';

/**
 * A correction of the current period (PUT .../usage/{feature}, audited from -> to): used becomes the number given,
 * asked twice since it replaces what the gateways counted.
 */
export function UsageCorrection({
  subscriberId,
  usage,
  onDone,
}: {
  subscriberId: string;
  usage: MeteredUsage;
  onDone: () => void;
}) {
  const [used, setUsed] = useState(String(usage.used));
  const changed = useSubscriberChanged(subscriberId);
  const correct = useMutation({
    mutationFn: (value: number) => subscribersApi.correctUsage(subscriberId, usage.feature, value),
    onSuccess: async () => {
      await changed();
      onDone();
    },
  });
  const valid = /^\d+$/.test(used.trim());
  const value = Number(used.trim());

  return (
    <div className="usage-correction" data-testid={`usage-correction-${usage.feature}`}>
      <ErrorNotice error={correct.error} />
      <div className="inline-form">
        <TextField
          label={`Corrected usage of ${usage.feature}`}
          inputMode="numeric"
          value={used}
          onChange={setUsed}
          error={valid ? undefined : 'A whole number of 0 or more.'}
          hint={`Now ${formatCount(usage.used)} this period; the change is audited.`}
        />
        <div className="form-actions">
          <ConfirmButton
            label="Set usage"
            confirmLabel={valid ? `Confirm: set usage to ${formatCount(value)}` : 'Confirm'}
            disabled={!valid}
            pending={correct.isPending}
            onConfirm={() => correct.mutate(value)}
          />
          <button type="button" className="button button-small" onClick={onDone}>
            Cancel
          </button>
        </div>
      </div>
    </div>
  );
}
