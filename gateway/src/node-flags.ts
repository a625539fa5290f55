/**
 * The Node.js flags the gateway runs with: `npm start`, the benchmarks and the deploy files (NODE_OPTIONS) all use
 * these.
 *
 * A larger young generation: Node's default semi-space (16 MB) fills every few hundred evals under load. Each
 * scavenge then copies the state of every request still in flight and takes about a millisecond. With 64 MB,
 * scavenges are four to five times rarer and not twice as long: the gateway's GC time fell from about 1.1 to
 * 0.5 µs per eval (bench/, 64 connections). It costs up to 96 MB more heap, taken only as load demands it
 * (V8 grows the young generation towards this maximum).
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
