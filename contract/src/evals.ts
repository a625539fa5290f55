import { Type, type Static } from '@sinclair/typebox';
import { CheckCreditSchema } from './credits.ts';

export const EvalParams = Type.Object({ subscriber_id: Type.String({ minLength: 1, maxLength: 255 }) });
export type EvalParams = Static<typeof EvalParams>;

/** Most one consume may deduct (DESIGN.md §5). */
export const MAX_CONSUME = 1_000_000_000;

export const CheckBody = Type.Object(
  {
    feature: Type.String({ minLength: 1, maxLength: 255, description: 'catalog feature key' }),
    consume: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_CONSUME,
        description:
          'metered features only: deduct this much if it fits (or the limit is soft or unlimited), atomically with ' +
          'the check; `allowed: false` and nothing deducted otherwise',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CheckBody = Static<typeof CheckBody>;

export const EntitlementsQuery = Type.Object(
  {
    all: Type.Optional(
      Type.Boolean({ description: 'every catalog feature, not only granted or overridden ones' }),
    ),
  },
  { additionalProperties: false },
);
export type EntitlementsQuery = Static<typeof EntitlementsQuery>;

/** DESIGN.md §5: a metered feature's answer, with its use in the current period. */
export const MeteredCheckResultSchema = Type.Object(
  {
    feature: Type.String(),
    kind: Type.Literal('metered'),
    limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'per period; null = unlimited',
    }),
    used: Type.Integer({ minimum: 0, description: 'used in the current period' }),
    remaining: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description:
        "what is left to use: the allowance's rest, max(0, limit - (used - what credits covered)), plus every live " +
        "credit's remaining; null when unlimited",
    }),
    allowed: Type.Boolean({
      description: 'remaining > 0, or true when unlimited or soft; after a consume: whether it was deducted',
    }),
    period_start: Type.String({ format: 'date-time' }),
    resets_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'when the next period starts; null for reset "never"',
    }),
    source: Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]),
    overage: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          'soft limits only: usage beyond the allowance and the credits, max(0, used - covered - limit)',
      }),
    ),
    credits: Type.Array(CheckCreditSchema, {
      description:
        'live credits with something left, in spending order (priority, soonest expiry, oldest); [] when none',
    }),
  },
  { description: 'the answer for a metered feature' },
);
export type MeteredCheckResult = Static<typeof MeteredCheckResultSchema>;

/**
 * SPEC.md part 2 "Entitlement check result", fields in this order: the one schema of the answer, used by the
 * gateway's route (response schema), the resolver's types (`CheckResult`) and the OpenAPI document.
 */
export const CheckResultSchema = Type.Union(
  [
    Type.Object({
      feature: Type.String(),
      kind: Type.Literal('flag'),
      allowed: Type.Boolean(),
      source: Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]),
    }),
    Type.Object({
      feature: Type.String(),
      kind: Type.Literal('limit'),
      limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
      source: Type.Union([Type.Literal('override'), Type.Literal('plan'), Type.Literal('none')]),
    }),
    MeteredCheckResultSchema,
  ],
  { $id: 'CheckResult' },
);

export type CheckResult = Static<typeof CheckResultSchema>;

export const EntitlementListSchema = Type.Object({
  subscriber_id: Type.String(),
  entitlements: Type.Array(CheckResultSchema),
});
export type EntitlementList = Static<typeof EntitlementListSchema>;
