import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import { pino } from 'pino';
import { secretSafeLogging, type LoggerSettings } from './logging.ts';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;
type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type ParentLogger = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger that becomes a real pino child (with the request id bound) only when something is
 * logged at an enabled level. Fastify makes one child per request; the gateway almost never logs on its hot
 * path, so building a child and serializing its bindings for every eval would be pure cost.
 */
class LazyChildLogger implements FastifyBaseLogger {
  #child: ParentLogger | null = null;

  constructor(
    private readonly parent: ParentLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.#real().level = level;
  }

  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  silent(): void {}

  /** Lazy as well: Fastify makes each request's logger as a child of the application's. */
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return new LazyChildLogger(this.#real(), bindings, options ?? {});
  }

  #real(): ParentLogger {
    this.#child ??= this.parent.child(this.bindings, this.options) as ParentLogger;
    return this.#child;
  }

  #log(level: Level, args: unknown[]): void {
    // A level the parent drops is dropped here too, without building the child (unless the route set its own).
    if (!this.#child && this.options.level === undefined && this.parent.isLevelEnabled?.(level) === false)
      return;
    const real = this.#real();
    (real[level] as (...logged: unknown[]) => void).apply(real, args);
  }
}

export type { LoggerSettings };

/**
 * Fastify's logger options for an application whose request loggers are lazy. The laziness lives in the logger
 * given as `loggerInstance` (its children are lazy), not in a `childLoggerFactory`: Fastify checks every logger a
 * custom factory returns, per request (an array, a filter and seven lookups), and skips that check only for its
 * own factory. `false` is Fastify's own silent logger, which makes no request logger at all.
 */
export function lazyRequestLoggers(
  settings: LoggerSettings,
): Pick<FastifyServerOptions, 'logger' | 'loggerInstance'> {
  if (settings === false) return { logger: false };
  const { stream, ...options } = settings;
  const pinoOptions = { ...secretSafeLogging(), ...options };
  const root = stream ? pino(pinoOptions, stream) : pino(pinoOptions);
  return { loggerInstance: new LazyChildLogger(root, {}, {}) };
}
