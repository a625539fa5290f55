import type { Plan } from '../../api/types.ts';

/** The plans a subscription may name: archived plans are not offered. */
export function PlanSelect({
  plans,
  value,
  onChange,
  label,
  exclude,
}: {
  plans: readonly Plan[];
  value: string;
  onChange: (key: string) => void;
  label: string;
  exclude?: string;
}) {
  return (
    <select aria-label={label} value={value} onChange={(e) => onChange(e.target.value)}>
      <option value="">Choose a plan…</option>
      {plans
        .filter((plan) => !plan.archived && plan.key !== exclude)
        .map((plan) => (
          <option key={plan.key} value={plan.key}>
            {plan.name} ({plan.key})
          </option>
        ))}
    </select>
  );
}
