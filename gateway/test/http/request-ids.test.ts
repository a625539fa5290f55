import { describe, expect, it, vi } from 'vitest';
import { ulid } from 'ulidx';
import { newRequestId } from '../../src/request-ids.ts';

const SHAPE = /^req_[0-9abcdefghjkmnpqrstvwxyz]{26}$/;

describe('gateway request ids', () => {
  it('are req_ + a lowercase ULID, unique across pool refills', () => {
    const ids = Array.from({ length: 5000 }, () => newRequestId());
    for (const id of ids) expect(id).toMatch(SHAPE);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('carry the time they were made, as a ULID of that millisecond does', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      for (const at of [Date.UTC(2026, 10, 24, 9, 30), Date.UTC(2031, 0, 1, 0, 0, 0, 1)]) {
        vi.setSystemTime(at);
        const id = newRequestId();
        expect(id.slice(4, 14)).toBe(ulid(at).slice(0, 10).toLowerCase());
        // The time part is rewritten for a new millisecond, never left from the one before.
        vi.setSystemTime(at + 1);
        expect(newRequestId().slice(4, 14)).toBe(ulid(at + 1).slice(0, 10).toLowerCase());
      }
    } finally {
      vi.useRealTimers();
    }
  });

  it('stay unique and keep their millisecond when many are made within it (blocks running out and growing)', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const at = Date.UTC(2026, 10, 24, 10, 0);
      vi.setSystemTime(at);
      const ids = Array.from({ length: 300 }, () => newRequestId());
      expect(new Set(ids).size).toBe(300);
      for (const id of ids) expect(id.slice(4, 14)).toBe(ulid(at).slice(0, 10).toLowerCase());
      vi.setSystemTime(at + 5);
      const later = newRequestId();
      expect(later).toMatch(SHAPE);
      expect(later.slice(4, 14)).toBe(ulid(at + 5).slice(0, 10).toLowerCase());
      expect(ids).not.toContain(later);
    } finally {
      vi.useRealTimers();
    }
  });

  it('are independent strings: a later id does not change an earlier one', () => {
    const first = newRequestId();
    const copy = `${first}`;
    newRequestId();
    expect(first).toBe(copy);
  });
});
