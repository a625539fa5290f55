import { describe, expect, it } from 'vitest';
import { startServiceGroup } from '@ent/common/process/service-group';
import { serviceLine } from '@ent/common/process/service-lines';

describe("npm start's output", () => {
  it('shows a JSON request line readably, under its service name', () => {
    const line = JSON.stringify({
      level: 30,
      time: 1,
      pid: 2,
      hostname: 'h',
      reqId: 'req_1',
      req: { method: 'GET', url: '/org/features', host: 'x', remoteAddress: '127.0.0.1' },
      res: { statusCode: 200 },
      responseTime: 3.456,
      msg: 'request completed',
    });
    expect(serviceLine('admin', line)).toBe('[admin] INFO request completed GET /org/features 200 3.5 ms');
  });

  it('shows an error with its message, and a plain line as it is, both named', () => {
    const line = JSON.stringify({
      level: 50,
      msg: 'request failed',
      err: { type: 'Error', message: 'boom' },
    });
    expect(serviceLine('gateway', line)).toBe('[gateway] ERROR request failed (Error: boom)');
    expect(serviceLine('services', 'redis-server running')).toBe('[services] redis-server running');
    expect(serviceLine('worker', '{not json')).toBe('[worker] {not json');
  });

  it('passes every line of every service to `output`, named, whichever stream it came on', async () => {
    const lines: string[] = [];
    const script =
      'console.log(JSON.stringify({level:30,msg:"listening"})); console.error("plain warning"); process.exit(0)';
    const group = startServiceGroup([{ name: 'admin', args: ['-e', script] }], {
      cwd: process.cwd(),
      env: process.env,
      log: () => {},
      output: (name, line, stream) => lines.push(`${stream} ${serviceLine(name, line)}`),
      exit: () => {},
    });
    // 'close': the child has exited and both of its streams were read to the end.
    await new Promise((resolve) => group.children[0]!.once('close', resolve));
    expect(lines.sort()).toEqual(['stderr [admin] plain warning', 'stdout [admin] INFO listening']);
  });
});
