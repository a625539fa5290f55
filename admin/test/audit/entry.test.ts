import { describe, expect, it } from 'vitest';
import {
  auditEntryIds,
  auditIdFloor,
  recordableDetails,
  rfc3339ToMs,
  routeTemplate,
} from '../../src/features/audit/entry.ts';

describe('pure helpers', () => {
  it('writes route templates with {name}', () => {
    expect(routeTemplate('/org/subscribers/:subscriber_id/overrides/:feature_key')).toBe(
      '/org/subscribers/{subscriber_id}/overrides/{feature_key}',
    );
    expect(routeTemplate('/org/features')).toBe('/org/features');
  });

  it('keeps details small and secret-free', () => {
    expect(recordableDetails(null)).toBeNull();
    expect(recordableDetails({})).toBeNull();
    expect(recordableDetails({ grants: { a: { from: null, to: { kind: 'flag' } } } })).toEqual({
      grants: { a: { from: null, to: { kind: 'flag' } } },
    });
    expect(
      recordableDetails({
        grants: Object.fromEntries(
          Array.from({ length: 200 }, (_, i) => [`feature_${i}`, { from: null, to: { kind: 'flag' } }]),
        ),
      }),
    ).toEqual({
      grants: { too_large: true },
    });
    expect(recordableDetails({ secret: 'whsec_abcdefghijklmnopqrstuvwxyz' })).toEqual({
      secret: '[redacted]',
    });
    // An invite link pasted into a free-text field (SPEC.md: never a key, invite link or webhook secret).
    const link = 'http://localhost:3000/console/join/Xz93Wye1yh-Zu2ITbFMDeUkPbwCqGiIlHyhmxDfeooM';
    expect(recordableDetails({ description: { from: '', to: `join here: ${link}` } })).toEqual({
      description: { from: '', to: '[redacted]' },
    });
    expect(recordableDetails({ description: { from: '', to: 'see /join/us on the wiki' } })).toEqual({
      description: { from: '', to: 'see /join/us on the wiki' },
    });
  });

  it('makes entry ids that carry occurred_at, so a time window is an id range', () => {
    const newAuditEntryId = auditEntryIds();
    const at = Date.parse('2026-11-22T10:00:00.123Z');
    const first = newAuditEntryId(at);
    const second = newAuditEntryId(at);
    expect(first.occurredAt.toISOString()).toBe('2026-11-22T10:00:00.123Z');
    expect(second.id > first.id).toBe(true);
    expect(first.id >= auditIdFloor(at)).toBe(true);
    expect(first.id < auditIdFloor(at + 1)).toBe(true);
    expect(newAuditEntryId(at - 5).id > second.id).toBe(true);
    expect(rfc3339ToMs('2026-11-22T10:00:00.123Z')).toBe(at);
    expect(rfc3339ToMs('2026-11-22T10:00:00.1231Z')).toBe(at + 1);
    expect(rfc3339ToMs('2026-11-22T11:00:00.123+01:00')).toBe(at);
  });
});
