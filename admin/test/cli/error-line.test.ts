import { describe, expect, it } from 'vitest';
import { errorLine } from '../../src/cli/error-line.ts';

describe("entctl's error line", () => {
  it("adds a fetch failure's cause, also when the cause is an AggregateError with no message of its own", () => {
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:3001');
    expect(errorLine(new TypeError('fetch failed', { cause: refused }))).toBe(
      'entctl: fetch failed: connect ECONNREFUSED 127.0.0.1:3001\n',
    );
    const bothAddresses = new AggregateError([new Error('connect ECONNREFUSED ::1:3001'), refused], '');
    expect(errorLine(new TypeError('fetch failed', { cause: bothAddresses }))).toBe(
      'entctl: fetch failed: connect ECONNREFUSED ::1:3001\n',
    );
    expect(errorLine(new Error('No organization org_x.'))).toBe('entctl: No organization org_x.\n');
  });
});
