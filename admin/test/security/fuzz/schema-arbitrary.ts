import fc from 'fast-check';
import { wrongTypeValues, oddStrings } from './hostile-values.ts';

/** The part of JSON Schema the OpenAPI document's request schemas use. */
export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  pattern?: string;
  format?: string;
}

/** Strings a schema accepts, near its edges (both length bounds) more often than a uniform draw would be. */
function stringsFor(schema: JsonSchema, known: readonly string[]): fc.Arbitrary<string> {
  if (schema.format === 'date-time') {
    return fc
      .date({ min: new Date(Date.UTC(1, 0, 1)), max: new Date(Date.UTC(9999, 11, 31)), noInvalidDate: true })
      .map((d) => d.toISOString());
  }
  if (schema.format === 'email') return fc.emailAddress();
  if (schema.format === 'uri') return fc.constantFrom('https://example.com/hook', 'http://127.0.0.1:1/x', 'ftp://x', 'https://[::1]/');
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.min(schema.maxLength ?? 64, 300);
  const options: fc.Arbitrary<string>[] = [];
  if (schema.pattern) {
    try {
      options.push(fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= (schema.maxLength ?? Infinity)));
    } catch {
      // A pattern fast-check cannot generate from: plain strings still exercise the validator.
    }
  } else {
    options.push(fc.string({ minLength, maxLength: Math.min(maxLength, 40), unit: 'grapheme' }));
    options.push(fc.constant('x'.repeat(Math.max(minLength, maxLength))));
  }
  if (known.length > 0) options.push(fc.constantFrom(...known));
  return fc.oneof(...options);
}

/** Values that a schema accepts (as far as its constraints go); the caller mixes in malformed ones. */
export function validValue(schema: JsonSchema, known: readonly string[], depth = 0): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((s) => validValue(s, known, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return stringsFor(schema, known);
    case 'integer':
      return fc.oneof(
        fc.integer({ min: Math.max(schema.minimum ?? -1000, -(2 ** 31)), max: Math.min(schema.maximum ?? 1000, 2 ** 31 - 1) }),
        fc.constantFrom(...[schema.minimum, schema.maximum].filter((n): n is number => n !== undefined), 0),
      );
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(schema.items && depth < 4 ? validValue(schema.items, known, depth + 1) : fc.constant(null), {
        maxLength: Math.min(schema.maxItems ?? 5, 5),
      });
    case 'object': {
      const properties = schema.properties ?? {};
      const required = new Set(schema.required ?? []);
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, inner] of Object.entries(properties)) shape[name] = depth < 4 ? validValue(inner, known, depth + 1) : fc.constant(null);
      return fc.record(shape, { requiredKeys: [...required].filter((k) => k in shape) });
    }
    default:
      return wrongTypeValues;
  }
}

/**
 * A value for this schema: mostly valid, sometimes one field given a wrong type or an odd string, one required
 * field dropped or an unknown field added, so validation and everything behind it meet both.
 */
export function fuzzedValue(schema: JsonSchema, known: readonly string[]): fc.Arbitrary<unknown> {
  const valid = validValue(schema, known);
  if (schema.type !== 'object' || !schema.properties) {
    return fc.oneof({ weight: 3, arbitrary: valid }, { weight: 1, arbitrary: wrongTypeValues });
  }
  const names = Object.keys(schema.properties);
  const mutated = fc
    .tuple(valid, fc.constantFrom(...names), fc.nat(4), wrongTypeValues, oddStrings)
    .map(([value, name, how, wrong, odd]) => {
      const copy = { ...(value as Record<string, unknown>) };
      if (how === 0) copy[name] = wrong;
      else if (how === 1) copy[name] = odd;
      else if (how === 2) delete copy[name];
      else if (how === 3) copy[`extra_${name}`] = wrong;
      else copy[name] = { nested: [wrong, odd] };
      return copy;
    });
  return fc.oneof({ weight: 2, arbitrary: valid }, { weight: 3, arbitrary: mutated }, { weight: 1, arbitrary: wrongTypeValues });
}
