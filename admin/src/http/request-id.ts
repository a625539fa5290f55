import type { IncomingMessage } from 'node:http';
import { newId } from '@ent/common/ids';

const FORWARDED_ID = /^req_[0-9a-z]{26}$/;

/** A fresh `req_` id, or the one the gateway already gave this request (so both services log the same id). */
export function requestIdFrom(acceptForwarded: boolean) {
  return (req: IncomingMessage): string => {
    const forwarded = req.headers['x-request-id'];
    if (acceptForwarded && typeof forwarded === 'string' && FORWARDED_ID.test(forwarded)) return forwarded;
    return newId('req');
  };
}
