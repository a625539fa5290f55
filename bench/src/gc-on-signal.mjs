/* global process */
// Bench only (memory mode): with --expose-gc, SIGUSR2 runs a full collection, so the heap read afterwards is
// what the process really holds, not garbage the collector has not reached yet.
process.on('SIGUSR2', () => globalThis.gc?.());
