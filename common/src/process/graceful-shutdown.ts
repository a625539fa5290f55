/** Whether the process has begun to stop; readiness probes read it and answer 503 from that moment on. */
export interface Lifecycle {
  readonly shuttingDown: boolean;
  beginShutdown(): void;
}

export function createLifecycle(): Lifecycle {
  let shuttingDown = false;
  return {
    get shuttingDown() {
      return shuttingDown;
    },
    beginShutdown() {
      shuttingDown = true;
    },
  };
}

export interface GracefulShutdownOptions {
  /** Flipped first, so /readyz fails while the process still serves (balancers stop sending new work). */
  lifecycle?: Lifecycle;
  /** How long to keep serving after readiness fails, before `close` (SHUTDOWN_DRAIN_DELAY_MS). */
  drainDelayMs: number;
  /** Hard limit from the signal to the exit (SHUTDOWN_TIMEOUT_MS); reaching it exits with code 1. */
  timeoutMs: number;
  /** Stops accepting, waits for work in flight and releases resources (for a Fastify app: `app.close()`). */
  close: () => Promise<void>;
  /**
   * The HTTP server `close` stops. A connection whose request was in flight when closing began stays open
   * (keep-alive) after its response, and the server's close waits for it until the client lets go; these are
   * closed as soon as they fall idle instead.
   */
  httpServer?: { closeIdleConnections(): void };
  /** A requested shutdown is routine (info); one that fails or overruns its deadline is an error. */
  log?: ShutdownLog;
  signals?: readonly NodeJS.Signals[];
  exit?: (code: number) => void;
}

export interface ShutdownLog {
  info(message: string): void;
  error(message: string): void;
}

const stderrLog: ShutdownLog = {
  info: (message) => process.stderr.write(`${message}\n`),
  error: (message) => process.stderr.write(`${message}\n`),
};

export interface GracefulShutdown {
  /** What a signal does; callable directly. Later calls return the same shutdown. */
  shutdown(reason: string): Promise<void>;
}

const REAP_IDLE_EVERY_MS = 50;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Stops the process in order on SIGTERM/SIGINT: readiness off, a drain delay while still serving, `close`, exit 0;
 * exit 1 when `close` fails or the deadline passes first. A repeated signal changes nothing: the deadline
 * already bounds the wait, and `npm start` delivers both a terminal's SIGINT and its own SIGTERM.
 *
 * The worker uses it too, without a lifecycle:
 * `installGracefulShutdown({ drainDelayMs: 0, timeoutMs: config.shutdownTimeoutMs, close: async () => {...} })`.
 */
export function installGracefulShutdown(options: GracefulShutdownOptions): GracefulShutdown {
  const log = options.log ?? stderrLog;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let running: Promise<void> | null = null;

  const shutdown = (reason: string): Promise<void> => {
    running ??= (async () => {
      log.info(
        `shutting down (${reason}): draining for ${options.drainDelayMs} ms, exiting within ${options.timeoutMs} ms`,
      );
      options.lifecycle?.beginShutdown();
      // Deliberately not unref'd: a close that never settles must still end in an exit.
      const deadline = setTimeout(() => {
        log.error(`shutdown did not finish within ${options.timeoutMs} ms; exiting`);
        exit(1);
      }, options.timeoutMs);
      let code = 0;
      try {
        if (options.drainDelayMs > 0) await sleep(options.drainDelayMs);
        const reaper =
          options.httpServer &&
          setInterval(() => options.httpServer?.closeIdleConnections(), REAP_IDLE_EVERY_MS);
        try {
          await options.close();
        } finally {
          clearInterval(reaper);
        }
      } catch (error) {
        log.error(`shutdown failed: ${(error as Error).stack ?? String(error)}`);
        code = 1;
      } finally {
        clearTimeout(deadline);
      }
      exit(code);
    })();
    return running;
  };

  for (const signal of options.signals ?? (['SIGTERM', 'SIGINT'] as const)) {
    process.on(signal, () => void shutdown(signal));
  }
  return { shutdown };
}
