import type { Scope } from '@ent/common/auth/scopes';
import { type AppError, forbidden, validationError } from '@ent/common/errors/app-error';
import { validatorCompiler } from '@ent/common/http/validation';
import { describeValidationError } from '@ent/common/http/validation';
import type { ImportRecordType } from '@ent/contract/imports';
import { findNulCharacter } from '../shared/nul-characters.ts';
import {
  CreditLineSchema,
  FeatureLineSchema,
  OverrideLineSchema,
  PlanLineSchema,
  SubscriberLineSchema,
  SubscriptionLineSchema,
  type ImportRecordLine,
} from '@ent/contract/import-lines';

/** A line longer than this is refused alone: a plan with its 1,000 grants is far below it. */
export const MAX_LINE_BYTES = 1024 * 1024;

type Validate = ((value: unknown) => boolean) & { errors?: unknown[] | null };

const compile = (schema: object): Validate =>
  validatorCompiler({ schema, method: 'POST', url: '/org/imports', httpPart: 'body' }) as unknown as Validate;

/** The single routes' body validation (the same ajv setup), per record type. */
const validators: Record<ImportRecordType, Validate> = {
  feature: compile(FeatureLineSchema),
  plan: compile(PlanLineSchema),
  subscriber: compile(SubscriberLineSchema),
  subscription: compile(SubscriptionLineSchema),
  override: compile(OverrideLineSchema),
  credit: compile(CreditLineSchema),
};

/** The scope the single route of each record type needs. */
const SCOPE_OF: Record<ImportRecordType, Scope> = {
  feature: 'catalog:write',
  plan: 'catalog:write',
  subscriber: 'subscribers:write',
  subscription: 'subscribers:write',
  override: 'subscribers:write',
  credit: 'subscribers:write',
};

const RECORD_TYPES = Object.keys(SCOPE_OF) as ImportRecordType[];

export type ParsedLine =
  | { ok: true; type: ImportRecordType; key: string; record: ImportRecordLine }
  | { ok: false; type: ImportRecordType | null; key: string | null; error: AppError };

/** The record's natural key, what it is upserted by. */
function naturalKey(record: ImportRecordLine): string {
  switch (record.type) {
    case 'feature':
    case 'plan':
      return record.key;
    case 'subscriber':
      return record.subscriber_id;
    case 'subscription':
      return `${record.subscriber_id}/${record.plan_id}`;
    case 'override':
      return `${record.subscriber_id}/${record.feature_key}`;
    case 'credit':
      return record.credit_id;
  }
}

function keyOf(value: Record<string, unknown>): string | null {
  const key = value.type === 'credit' ? value.credit_id : (value.key ?? value.subscriber_id);
  return typeof key === 'string' ? key : null;
}

/** A `\uD800` to `\uDFFF` escape: the only way a line (UTF-8, decoded) can hold half of a surrogate pair. */
const LONE_SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The value with each half of a surrogate pair standing alone replaced by U+FFFD, in keys and strings, as a single
 * route stores it (its text reaches Postgres as UTF-8, which has no such half): a staged line is jsonb, which
 * refuses the escape, and failed the whole upload.
 */
function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(LONE_SURROGATE, '\uFFFD');
  if (Array.isArray(value)) return value.map(wellFormed);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [wellFormed(key) as string, wellFormed(inner)]),
    );
  return value;
}

/**
 * One NDJSON line, checked as its single route checks a body (same schemas, same error codes and fields), and for
 * the scope that route needs. What needs the database (a missing plan or subscriber) or compares fields (a credit's
 * instants and spent) is the batch's to find.
 */
export function parseLine(text: string, scopes: ReadonlySet<Scope>): ParsedLine {
  let value: unknown;
  try {
    value = JSON.parse(text);
    if (LONE_SURROGATE_ESCAPE.test(text)) value = wellFormed(value);
  } catch {
    return {
      ok: false,
      type: null,
      key: null,
      error: validationError('The line is not valid JSON.', { field: 'line' }),
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return {
      ok: false,
      type: null,
      key: null,
      error: validationError('The line must be a JSON object.', { field: 'line' }),
    };
  const object = value as Record<string, unknown>;
  // Postgres text and jsonb cannot hold U+0000 (features/shared/nul-characters.ts), and a refused line is staged with
  // its key and its error's value: checked first, with the key made storable. The text is looked at first (a line
  // without the escape holds none); a match may be an escaped backslash before `u0000`, so the values decide.
  const nulAt = text.includes('\\u0000') ? findNulCharacter(object) : null;
  if (nulAt !== null)
    return {
      ok: false,
      type: RECORD_TYPES.find((candidate) => candidate === object.type) ?? null,
      key: keyOf(object)?.replaceAll('\u0000', '\uFFFD') ?? null,
      error: validationError(`${nulAt || 'line'} must not contain NUL (U+0000) characters.`, {
        field: nulAt || 'line',
        location: 'line',
      }),
    };
  const type = RECORD_TYPES.find((candidate) => candidate === object.type) ?? null;
  if (type === null)
    return {
      ok: false,
      type: null,
      key: keyOf(object),
      error: validationError(`type must be one of: ${RECORD_TYPES.join(', ')}`, {
        field: 'type',
        value: object.type ?? null,
      }),
    };
  const key = keyOf(object);
  if (!scopes.has(SCOPE_OF[type]))
    return {
      ok: false,
      type,
      key,
      error: forbidden(`This API key lacks the "${SCOPE_OF[type]}" scope a ${type} line needs.`, {
        field: 'type',
        value: type,
      }),
    };
  const validate = validators[type];
  if (!validate(object)) {
    const { field, message } = describeValidationError((validate.errors ?? []) as never, 'line');
    return { ok: false, type, key, error: validationError(message, { field, location: 'line' }) };
  }
  const record = object as unknown as ImportRecordLine;
  return { ok: true, type, key: naturalKey(record), record };
}
