import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp, PaginationQuery, Timestamp, listOf } from './common.ts';

/**
 * DESIGN.md §5, "Credits": amounts added to a subscriber's metered allowance (a paid top-up, a promotional
 * grant, a rollover), spent after the plan's allowance by priority, soonest expiry, oldest.
 */

/** Largest amount one credit may carry: Lua numbers are exact integers up to 2^53. */
export const MAX_CREDIT_AMOUNT = 1_000_000_000_000;
export const DEFAULT_CREDIT_PRIORITY = 10;
/** Credits a subscriber may hold live per feature: each is read by the eval's Lua call. */
export const MAX_LIVE_CREDITS_PER_FEATURE = 100;

export const CreditStatusSchema = Type.Union(
  [
    Type.Literal('scheduled', { description: 'effective_at is still ahead' }),
    Type.Literal('active', { description: 'effective, not expired, not voided, something left' }),
    Type.Literal('spent', { description: 'nothing left' }),
    Type.Literal('expired', { description: 'expires_at has passed; what was left is gone' }),
    Type.Literal('voided', { description: 'voided by DELETE; what was spent stays spent' }),
  ],
  { description: 'computed from the clock and the balance when read' },
);
export type CreditStatus = Static<typeof CreditStatusSchema>;

export const CreditSourceSchema = Type.Union([
  Type.Literal('manual', { description: 'POST /org/subscribers/{id}/credits or an import' }),
  Type.Literal('rollover', { description: "a period's unused allowance (a grant's `rollover`)" }),
]);

export const CreditSchema = Type.Object(
  {
    credit_id: Type.String({ description: '`cr_` and a random suffix' }),
    subscriber_id: Type.String(),
    feature: Type.String({ description: 'a metered feature key' }),
    name: Type.Union([Type.String(), Type.Null()]),
    amount: Type.Integer({ minimum: 1 }),
    spent: Type.Integer({ minimum: 0 }),
    remaining: Type.Integer({
      minimum: 0,
      description: 'amount - spent while scheduled or active; 0 once expired, voided or spent',
    }),
    priority: Type.Integer({ minimum: 1, description: '1 is spent first' }),
    effective_at: Timestamp,
    expires_at: NullableTimestamp,
    status: CreditStatusSchema,
    source: CreditSourceSchema,
    voided_at: NullableTimestamp,
    created_at: Timestamp,
  },
  { $id: 'Credit' },
);
export type CreditBody = Static<typeof CreditSchema>;

export const CreateCreditBody = Type.Object(
  {
    feature: Type.String({ minLength: 1, maxLength: 255, description: 'a metered feature key' }),
    amount: Type.Integer({ minimum: 1, maximum: MAX_CREDIT_AMOUNT }),
    effective_at: Type.Optional(
      Type.String({ format: 'date-time', description: 'default: now; a past time is accepted' }),
    ),
    expires_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'null or omitted: never; must be later than effective_at',
      }),
    ),
    priority: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: `1 is spent first; default ${DEFAULT_CREDIT_PRIORITY}` }),
    ),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
);
export type CreateCreditBody = Static<typeof CreateCreditBody>;

export const CreditsParams = Type.Object({ subscriber_id: Type.String({ minLength: 1, maxLength: 255 }) });
export type CreditsParams = Static<typeof CreditsParams>;

export const CreditParams = Type.Object({
  subscriber_id: Type.String({ minLength: 1, maxLength: 255 }),
  credit_id: Type.String({ minLength: 1, maxLength: 255 }),
});
export type CreditParams = Static<typeof CreditParams>;

export const ListCreditsQuery = Type.Object(
  {
    ...PaginationQuery,
    feature: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    status: Type.Optional(CreditStatusSchema),
  },
  { additionalProperties: false },
);
export type ListCreditsQuery = Static<typeof ListCreditsQuery>;

export const CreditListSchema = listOf('credits', CreditSchema);
export type CreditList = Static<typeof CreditListSchema>;

/** What the check result of a metered feature lists: live credits with something left, in spending order. */
export const CheckCreditSchema = Type.Object({
  credit_id: Type.String(),
  remaining: Type.Integer({ minimum: 0 }),
  expires_at: NullableTimestamp,
});
export type CheckCredit = Static<typeof CheckCreditSchema>;

/** A grant's `rollover`: at a period's end the unused allowance, up to max, becomes a credit. */
export const RolloverSchema = Type.Object(
  { max: Type.Integer({ minimum: 1, maximum: MAX_CREDIT_AMOUNT }) },
  { additionalProperties: false, description: 'the credit expires at the next period end' },
);
export type Rollover = Static<typeof RolloverSchema>;
