import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';

/** How long a connection closing after an early answer keeps reading what its client still sends. */
export const LINGER_MS = 5000;
/** How much of it is read (and dropped) at most: a client that has read the answer stops well before. */
export const LINGER_BYTES = 32 * 1024 * 1024;

/** How often a lingering connection's bytes read are checked against LINGER_BYTES. */
const BYTES_CHECK_MS = 20;

const lingering = new WeakSet<Socket>();

/**
 * For a response sent before its request's body arrived (413 on a body over the limit) on a connection it closes.
 * Closing at once, with the client's bytes still arriving, makes the kernel answer them with a reset; a client still
 * writing (Node's `fetch`) then fails with EPIPE or ECONNRESET and never reads the response, which was on its way.
 * Instead, after the response, what the client still sends is read and dropped (up to LINGER_BYTES or LINGER_MS,
 * whichever comes first: a client that read the answer stops sending), then the connection is closed: nginx's
 * lingering close. Node's server closes a `Connection: close` response's socket with `socket.destroySoon()` once the
 * response is written, so this socket's waits first. (Half-closing it at once ends its reading side too: Node's
 * server then reads no more and resets the connection.)
 */
export function lingerBeforeClosing(request: IncomingMessage): void {
  const { socket } = request;
  // Requests made with `inject` have no real socket and nothing to close.
  if (!(socket instanceof Socket) || lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  const closeOnceFlushed = socket.destroySoon.bind(socket);
  socket.destroySoon = function lingeringClose(this: Socket) {
    // The whole body already read (it finished arriving while the answer was written): nothing to wait for.
    if (request.readableEnded) return closeOnceFlushed();
    const readBefore = this.bytesRead;
    const close = () => {
      stopWaiting();
      closeOnceFlushed();
    };
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    // Node's parser drops the rest of an answered request's body itself (no 'data' events): the socket counts it.
    const bytesCheck = setInterval(() => {
      if (this.bytesRead - readBefore > LINGER_BYTES) close();
    }, BYTES_CHECK_MS);
    function stopWaiting() {
      clearTimeout(timer);
      clearInterval(bytesCheck);
    }
    this.once('close', stopWaiting);
    // The whole body read: nothing left for a reset to answer.
    request.once('end', close);
    request.resume();
  };
}
