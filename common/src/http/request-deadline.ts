import type { IncomingMessage } from 'node:http';

/** Node's HTTP parser of a connection; `remove` takes it off the server's request timers (Node >= 18.14). */
interface TimedParser {
  remove?: () => void;
}

/**
 * Takes one request off the server's whole-request deadline (`requestTimeout`, REQUEST_RECEIVE_TIMEOUT_MS), for a
 * route whose body may rightly take longer to stream than any other request (an import of up to 1 GiB, staged as
 * it arrives). Only this request: the connection's next request is timed again (Node adds the parser back when a
 * message begins). The socket's idle timeout still cuts off a body that stops coming. Node keeps the timers on the
 * connection's parser and offers no public call for this, so it goes through `socket.parser.remove()`, what Node
 * itself does for an upgraded connection; false (and nothing changed) where that is not there (an injected request).
 */
export function exemptFromRequestDeadline(request: IncomingMessage): boolean {
  const parser = (request.socket as unknown as { parser?: TimedParser | null } | null)?.parser;
  if (typeof parser?.remove !== 'function') return false;
  parser.remove();
  return true;
}
