import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';

/** How long a connection closing after an early answer keeps reading what its client still sends. */
export const LINGER_MS = 5000;
/** How much of it is read (and dropped) at most: a client that has read the answer stops well before. */
export const LINGER_BYTES = 32 * 1024 * 1024;

const lingering = new WeakSet<Socket>();

/**
 * For a response sent before its request's body arrived (413 on a body over the limit) on a connection it closes.
 * Closing at once, with the client's bytes still arriving, makes the kernel answer them with a reset; a client still
 * writing (Node's `fetch`) then fails with EPIPE or ECONNRESET and never reads the response, which was on its way.
 * Instead, once the response is flushed, the connection is half-closed and what the client still sends is read and
 * dropped (up to LINGER_BYTES or LINGER_MS, whichever comes first: a client that read the answer stops sending),
 * then closed: nginx's lingering close. Node's server closes a `Connection: close` response's socket with
 * `socket.destroySoon()` right after the response is flushed, so this socket's is replaced.
 */
export function lingerBeforeClosing(request: IncomingMessage): void {
  const { socket } = request;
  // Requests made with `inject` have no real socket and nothing to close.
  if (!(socket instanceof Socket) || lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  socket.destroySoon = function lingeringClose(this: Socket) {
    if (this.writable) this.end();
    let drained = 0;
    const close = () => {
      clearTimeout(timer);
      this.destroy();
    };
    const timer = setTimeout(close, LINGER_MS);
    this.once('close', () => clearTimeout(timer));
    // The whole body read: nothing left for a reset to answer.
    request.once('end', close);
    request.on('data', (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > LINGER_BYTES) close();
    });
    request.resume();
  };
}
