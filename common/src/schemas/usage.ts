import { Type, type Static } from '@sinclair/typebox';
import { NullableTimestamp } from './common.ts';

/** SPEC.md part 2, "Usage record (current month)". */
export const UsageRecordSchema = Type.Object(
  {
    gated: Type.Boolean({ description: 'false = no monthly cap applies to the organization now' }),
    reason: Type.Union([Type.Literal('unlimited'), Type.Null()], {
      description: 'why not gated; null when gated',
    }),
    period: Type.String({ pattern: '^[0-9]{4}-[0-9]{2}$', description: 'UTC month, YYYY-MM' }),
    count: Type.Integer({ minimum: 0, description: 'evals counted this month' }),
    limit: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'evals included; null = unlimited',
    }),
    plan: Type.Union([Type.String(), Type.Null()], { description: 'key of the allotment that applies' }),
    blocking: Type.Boolean({ description: 'true = evals stop 7 days after first reaching 100%' }),
    warn: Type.Union([Type.Literal('80'), Type.Literal('100'), Type.Literal('grace'), Type.Null()]),
    allowed: Type.Boolean({ description: 'false once evals are stopped' }),
    first_over_at: NullableTimestamp,
    blocked_at: NullableTimestamp,
  },
  { $id: 'UsageRecord' },
);
export type UsageRecordBody = Static<typeof UsageRecordSchema>;
