import fc from 'fast-check';

/** JSON text nested `depth` levels deep (objects or arrays), for the body depth limit. */
const nestedJson = (depth: number, open = '[', close = ']'): string =>
  `${open.repeat(depth)}${close.repeat(depth)}`;

/** Strings no well-behaved client sends: bidi controls, zero-width and BOM, emoji, NUL, very long, numeric-looking. */
export const oddStrings = fc.constantFrom(
  '',
  ' ',
  '\u202Eevil\u202C',
  '\u200B',
  '\uFEFF',
  '😀👩‍👩‍👧',
  'a\u0000b',
  'x'.repeat(300),
  'x'.repeat(20_000),
  '١٢٣',
  '1e309',
  '-0',
  'NaN',
  'null',
  'true',
  '[]',
  '{}',
  '../../etc/passwd',
  '%',
  '__proto__',
  'constructor',
  'mem_01m84j1yq08k3wgcams5zgrka9',
  '2026-06-30T23:59:60Z',
  '2026-02-30T00:00:00Z',
  '2026-01-01T00:00:00+24:00',
  '2026-01-01T00:00:00-00:00',
);

/** Values of every JSON type and extreme magnitude, to put where a schema wants something else. */
export const wrongTypeValues: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    2 ** 53 + 2,
    -(2 ** 63),
    1e308,
    -1e308,
    5e-324,
    [],
    {},
    [null],
    { a: 1 },
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  oddStrings,
  fc.array(fc.integer(), { maxLength: 5 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.integer(), { maxKeys: 3 }),
);

/** Raw JSON texts that are malformed, hostile or just odd: sent as the body with content-type application/json. */
export const rawJsonBodies = fc.constantFrom(
  '',
  ' ',
  '{',
  '{"a":',
  'null',
  '[]',
  '"text"',
  '12',
  '{"a":1,"a":2}',
  '{"__proto__":{"x":1}}',
  '{"constructor":{"prototype":{"x":1}}}',
  '{"name":"\\ud800"}',
  '{"name":"\\udfff\\u202e\\u0000"}',
  nestedJson(33),
  nestedJson(20_000),
  nestedJson(8000, '{"a":', '}'),
  `{"k":${nestedJson(5000)}}`,
  `{"a":"${'[{'.repeat(10_000)}"}`,
  '{"limit":1e400}',
  '{"limit":-0}',
  '\uFEFF{}',
);

/** Path segments: encoded odd unicode, raw invalid percent sequences (lone surrogates as bytes), over-long values. */
export const hostilePathSegments = fc.oneof(
  oddStrings.filter((s) => s.length > 0).map((s) => encodeURIComponent(s)),
  fc.constantFrom(
    '%ED%A0%80',
    '%ED%B0%80',
    '%F0%9F',
    '%C0%AF',
    '%',
    '%ZZ',
    '%00',
    '%2F',
    '..',
    '.',
    `${'a'.repeat(2000)}`,
    `${'%F0%9F%98%80'.repeat(300)}`,
  ),
);

/** Query values the same way, plus bracketed names, repeats and stray separators. */
export const hostileQueryValues = fc.oneof(
  oddStrings.map((s) => encodeURIComponent(s)),
  fc.constantFrom(
    '%ED%A0%80',
    '%',
    '%ZZ',
    '&',
    '=',
    '==',
    '%26',
    `${'9'.repeat(400)}`,
    '-1',
    '0',
    '101',
    '1.5',
    '1e3',
    'true',
    'TRUE',
  ),
);
