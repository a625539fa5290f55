import { afterEach, describe, expect, it } from 'vitest';
import { startServiceGroup, type ServiceGroup } from '@ent/common/process/service-group';

/** A child that runs until killed, like a service. */
const SLEEPER = ['-e', 'setInterval(() => {}, 1000)'];
/** A child that fails at once, like a service whose port is taken. */
const FAILING = ['-e', 'process.exit(3)'];

let group: ServiceGroup | undefined;
afterEach(() => {
  for (const child of group?.children ?? [])
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  group = undefined;
});

function groupOf(services: { name: string; args: string[] }[]) {
  const logged: string[] = [];
  let exitCode: number | undefined;
  let exited: () => void = () => {};
  const exit = new Promise<void>((resolve) => (exited = resolve));
  group = startServiceGroup(services, {
    cwd: process.cwd(),
    env: process.env,
    log: (message) => logged.push(message),
    exit: (code) => {
      exitCode = code;
      exited();
    },
  });
  return { group, logged, exit, exitCode: () => exitCode };
}

const exitOf = (child: {
  once(event: 'exit', listener: () => void): unknown;
  exitCode: number | null;
  signalCode: string | null;
}) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once('exit', () => resolve()));
const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

describe('npm start service group', () => {
  it('fails the start when a service exits while starting: the others are stopped', async () => {
    const {
      group: started,
      logged,
      exit,
      exitCode,
    } = groupOf([
      { name: 'admin', args: SLEEPER },
      { name: 'gateway', args: FAILING },
    ]);
    await exit;
    expect(exitCode()).toBe(3);
    expect(logged).toEqual(['gateway exited (3) while starting; stopping the rest']);
    expect(started.children[0]!.signalCode).toBe('SIGTERM');
  });

  it('once started, a killed service leaves the others running (admin down, the gateway still answers)', async () => {
    const {
      group: started,
      logged,
      exitCode,
    } = groupOf([
      { name: 'admin', args: SLEEPER },
      { name: 'worker', args: SLEEPER },
      { name: 'gateway', args: SLEEPER },
    ]);
    started.markStarted();
    const [admin, worker, gateway] = started.children;
    admin!.kill('SIGKILL');
    await exitOf(admin!);
    await settle();
    expect(logged).toEqual([
      'admin exited (SIGKILL); the others keep running. Start it again with `npm run admin`',
    ]);
    expect(worker!.exitCode).toBeNull();
    expect(gateway!.exitCode).toBeNull();
    expect(exitCode()).toBeUndefined();

    worker!.kill('SIGTERM');
    gateway!.kill('SIGKILL');
    await Promise.all([exitOf(worker!), exitOf(gateway!)]);
    await settle();
    expect(logged.at(-1)).toMatch(/exited \(SIG(TERM|KILL)\); no service is left running$/);
    expect(exitCode()).toBe(1);
  });

  it('stops every service when asked (npm stopped)', async () => {
    const {
      group: started,
      exit,
      exitCode,
    } = groupOf([
      { name: 'admin', args: SLEEPER },
      { name: 'gateway', args: SLEEPER },
    ]);
    started.markStarted();
    started.stopAll(0);
    await exit;
    expect(exitCode()).toBe(0);
    expect(started.children.map((child) => child.signalCode)).toEqual(['SIGTERM', 'SIGTERM']);
  });
});
