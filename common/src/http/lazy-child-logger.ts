import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;
type ChildLoggerFactory = NonNullable<FastifyServerOptions['childLoggerFactory']>;
type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type ParentLogger = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger that becomes a real pino child (with the request id bound) only when something is
 * logged at an enabled level. Fastify makes one child per request; the gateway almost never logs on its hot
 * path, so building a child and serializing its bindings for every eval would be pure cost.
 */
class LazyChildLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | null = null;

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

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options);
  }

  #real(): FastifyBaseLogger {
    this.#child ??= this.parent.child(this.bindings, this.options);
    return this.#child;
  }

  #log(level: Level, args: unknown[]): void {
    // A level the parent drops is dropped here too, without building the child (unless the route set its own).
    if (!this.#child && this.options.level === undefined && this.parent.isLevelEnabled?.(level) === false) return;
    const real = this.#real();
    (real[level] as (...logged: unknown[]) => void).apply(real, args);
  }
}

export const lazyChildLoggerFactory: ChildLoggerFactory = (logger, bindings, options) =>
  new LazyChildLogger(logger, bindings, options);
