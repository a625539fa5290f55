/** The floor of the young generation's semi-space, in MiB: the size a busy gateway grows it to on its own. */
export const YOUNG_GENERATION_MB = 16;

/**
 * V8 flags every gateway process is started with: package.json's `gateway` script, deploy/ (Dockerfile, compose,
 * Kubernetes), `npm start` (scripts/start.ts) and the bench. V8 takes them on the command line only: NODE_OPTIONS
 * refuses them, and a running process can no longer resize its heap's floor.
 *
 * They set the young generation's floor. V8 otherwise sizes it by recent history: it grows only as survivors of
 * scavenges accumulate, and falls back to 1 MiB whenever a collection finds the allocation rate low (a quiet spell,
 * a phase at a modest rate). An eval allocates a few KB that die young, so the cost of an eval follows how often the
 * gateway scavenges: a gateway whose history had shrunk its young generation scavenged about twice as often per eval
 * as a fresh one under the same load, and each idle gap between bursts shrank it again (docs/decisions.md, "Issue
 * 32, item 6"). With the floor at the size a busy gateway reaches anyway, its cost per eval no longer depends on its
 * past.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = [`--min-semi-space-size=${YOUNG_GENERATION_MB}`];

const MIN_SEMI_SPACE = /^--min[-_]semi[-_]space[-_]size=(\d+)$/;

/** Why this process's cost per eval may drift with its history (it was not started as deployed), or null. */
export function youngGenerationWarning(execArgv: readonly string[] = process.execArgv): string | null {
  const floor = Math.max(0, ...execArgv.map((arg) => Number(MIN_SEMI_SPACE.exec(arg)?.[1] ?? 0)));
  if (floor >= YOUNG_GENERATION_MB) return null;
  return (
    `the gateway was started without ${GATEWAY_NODE_FLAGS.join(' ')} (node ${GATEWAY_NODE_FLAGS.join(' ')} ` +
    '--import tsx gateway/src/server.ts): its young generation will shrink after quiet spells, and its CPU per ' +
    'eval grow with that'
  );
}
