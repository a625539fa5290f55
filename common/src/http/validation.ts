import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { isDateTime } from './date-time.ts';
import { validationError } from '../errors/app-error.ts';

// ajv-formats ships CommonJS; its default export arrives wrapped under ESM.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function makeAjv(coerceTypes: boolean | 'array'): Ajv {
  const ajv = new Ajv({
    coerceTypes,
    // Unknown fields are refused, not silently dropped: a PATCH carrying `key` must fail loudly.
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
  });
  addFormats(ajv);
  // Every timestamp the API accepts must become a Date: see isDateTime for what ajv-formats lets through.
  ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
  return ajv;
}

const bodyAjv = makeAjv(false);
const textAjv = makeAjv('array');

type Validator = ((data: unknown, context?: object) => boolean) & {
  errors?: ErrorObject[] | null;
  schemaEnv?: unknown;
};

/** A number as a query string writes it: decimal digits. ajv's coercion (`Number()`) also takes `0x10`, `1e1`, `+3`. */
const DECIMAL_TEXT = { integer: /^-?[0-9]+$/, number: /^-?[0-9]+(\.[0-9]+)?$/ } as const;

/** The query string's numeric fields (`limit`), whose text must be decimal before ajv coerces it. */
function numericFields(schema: object): [string, RegExp][] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  return Object.entries(properties).flatMap(([name, property]) =>
    property.type === 'integer' || property.type === 'number' ? [[name, DECIMAL_TEXT[property.type]]] : [],
  );
}

/**
 * A query string's validator that refuses a numeric field written otherwise than in decimal (SPEC.md: a malformed
 * value is 422), with the error ajv gives a value of the wrong type, before ajv coerces the rest.
 */
function withDecimalNumbers(validate: Validator, fields: readonly [string, RegExp][]): Validator {
  const checked: Validator = (data, context) => {
    const query = (data ?? {}) as Record<string, unknown>;
    for (const [name, pattern] of fields) {
      const text = query[name];
      if (typeof text === 'string' && !pattern.test(text)) {
        const type = pattern === DECIMAL_TEXT.integer ? 'integer' : 'number';
        checked.errors = [
          {
            instancePath: `/${name}`,
            schemaPath: `#/properties/${name}/type`,
            keyword: 'type',
            params: { type },
            message: `must be ${type}`,
          },
        ];
        return false;
      }
    }
    const valid = validate(data, context);
    checked.errors = validate.errors ?? null;
    return valid;
  };
  // Fastify hands ajv's own validators their parent (to coerce a root value) when they carry schemaEnv.
  checked.schemaEnv = validate.schemaEnv;
  return checked;
}

/**
 * Bodies are validated strictly (a string "5" is not a number); query strings, params and headers are text
 * on the wire, so they are coerced (a query string's numbers only from decimal text).
 */
export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  const validate = ajv.compile(schema) as Validator;
  const fields = httpPart === 'querystring' ? numericFields(schema) : [];
  return (fields.length > 0 ? withDecimalNumbers(validate, fields) : validate) as ReturnType<
    FastifySchemaCompiler<object>
  >;
};

export interface ValidationFailure {
  field: string;
  message: string;
}

/**
 * The values a union of literals allows, when ajv's errors start with one `const` failure per branch followed by
 * the union's own `anyOf` failure at the same place (how a TypeBox `Type.Union` of `Type.Literal`s fails).
 */
function literalUnionValues(errors: readonly ErrorObject[]): unknown[] | null {
  const values: unknown[] = [];
  for (const error of errors) {
    if (error.instancePath !== errors[0]!.instancePath) return null;
    if (error.keyword === 'anyOf') return values.length > 0 ? values : null;
    if (error.keyword !== 'const') return null;
    values.push((error.params as { allowedValue?: unknown }).allowedValue);
  }
  return null;
}

/** Turns ajv's first error into the field name clients see in `error.details.field`. */
export function describeValidationError(errors: readonly ErrorObject[], part: string): ValidationFailure {
  const error = errors[0]!;
  const path = error.instancePath.split('/').filter(Boolean).join('.');
  const params = error.params as Record<string, unknown>;
  const extra =
    typeof params.additionalProperty === 'string'
      ? params.additionalProperty
      : typeof params.missingProperty === 'string'
        ? params.missingProperty
        : '';
  const field = [path, extra].filter(Boolean).join('.') || part;
  let message = `${field} ${error.message ?? 'is invalid'}`;
  if (extra && typeof params.additionalProperty === 'string') message = `${field} is not a known field`;
  if (typeof params.missingProperty === 'string') message = `${field} is required`;
  if (error.keyword === 'format' && params.format === 'date-time') {
    message = `${field} must be an RFC 3339 date-time with a real date, seconds 00-59 and an offset within ±23:59`;
  }
  // No body at all reads as none (json-body.ts), so this also answers a request that sent nothing.
  if (error.keyword === 'type' && field === 'body' && params.type === 'object') {
    message = 'The request body must be a JSON object.';
  }
  const allowed = error.keyword === 'enum' ? params.allowedValues : literalUnionValues(errors);
  if (Array.isArray(allowed)) message = `${field} must be one of: ${allowed.join(', ')}`;
  return { field, message };
}

const compiledBodies = new WeakMap<object, Validator>();

/**
 * Checks `body` as a route checks its body (the same ajv, formats and messages), for a caller outside a route that
 * writes what the route writes (entctl): the first failure as the route's 422 `VALIDATION_ERROR`.
 */
export function assertValidBody(schema: object, body: unknown): void {
  let validate = compiledBodies.get(schema);
  if (!validate) {
    validate = bodyAjv.compile(schema) as Validator;
    compiledBodies.set(schema, validate);
  }
  if (validate(body)) return;
  const { field, message } = describeValidationError(validate.errors ?? [], 'body');
  throw validationError(message, { field });
}
