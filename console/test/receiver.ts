import { createServer } from 'node:http';
import { freePort } from '../../gateway/test/processes.ts';

export interface Receiver {
  url: string;
  /** The body of every POST received, in order. */
  received: string[];
  close(): Promise<void>;
}

/** A webhook endpoint of the test: answers 200 to every POST and keeps what it got. */
export async function startReceiver(): Promise<Receiver> {
  const received: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      if (request.method === 'POST') received.push(body);
      response.writeHead(200).end();
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
