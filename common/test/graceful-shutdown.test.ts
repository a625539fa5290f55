import { describe, expect, it } from 'vitest';
import { installGracefulShutdown } from '../src/process/graceful-shutdown.ts';

function recorder() {
  const lines: { level: 'info' | 'error'; message: string }[] = [];
  return {
    lines,
    log: {
      info: (message: string) => lines.push({ level: 'info', message }),
      error: (message: string) => lines.push({ level: 'error', message }),
    },
  };
}

describe('graceful shutdown log levels', () => {
  it('logs a requested shutdown (SIGTERM) at info, not as a warning or error', async () => {
    const { lines, log } = recorder();
    const exits: number[] = [];
    const { shutdown } = installGracefulShutdown({
      drainDelayMs: 0,
      timeoutMs: 5000,
      close: async () => {},
      log,
      signals: [],
      exit: (code) => exits.push(code),
    });
    await shutdown('SIGTERM');
    expect(exits).toEqual([0]);
    expect(lines).toEqual([{ level: 'info', message: expect.stringContaining('shutting down (SIGTERM)') }]);
  });

  it('logs a shutdown whose close fails at error', async () => {
    const { lines, log } = recorder();
    const exits: number[] = [];
    const { shutdown } = installGracefulShutdown({
      drainDelayMs: 0,
      timeoutMs: 5000,
      close: async () => {
        throw new Error('pool would not close');
      },
      log,
      signals: [],
      exit: (code) => exits.push(code),
    });
    await shutdown('SIGTERM');
    expect(exits).toEqual([1]);
    expect(lines.map((line) => line.level)).toEqual(['info', 'error']);
    expect(lines[1]!.message).toContain('pool would not close');
  });
});
