import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { AppError } from '../errors/app-error.ts';
import { newId } from '../ids.ts';

interface ClientError extends Error {
  code?: string;
}

function appErrorFor(error: ClientError): AppError {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new AppError(408, 'REQUEST_TIMEOUT', 'The request was not received in time.');
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return new AppError(431, 'REQUEST_HEADERS_TOO_LARGE', 'The request line and headers exceed 16 KB; shorten the URL or the headers.');
  }
  return new AppError(400, 'BAD_REQUEST', 'The request is not valid HTTP.');
}

/**
 * Node's parser refuses some requests before Fastify sees them (a request line or headers over 16 KB, bytes
 * that are not HTTP): those still get SPEC.md's error body, with a fresh request id, instead of Fastify's own.
 */
export function clientErrorHandler(error: ClientError, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) {
    const appError = appErrorFor(error);
    const body = JSON.stringify(appError.toBody(newId('req')));
    socket.write(
      `HTTP/1.1 ${appError.status} ${STATUS_CODES[appError.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
