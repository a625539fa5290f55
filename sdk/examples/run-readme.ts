// `npm run sdk:example`: the README's example against a running service, printing what it answers.
// BASE (default http://127.0.0.1:3000) and KEY as in the README's walk-through, which makes subscriber cust_42.
import { readmeExample } from './readme.ts';

const baseUrl = process.env.BASE ?? 'http://127.0.0.1:3000';
const apiKey = process.env.KEY;
if (!apiKey) {
  process.stderr.write(
    'Set KEY to an API key (printed by npm start, or: npx entctl org create --name Acme --json)\n',
  );
  process.exit(2);
}
const answer = await readmeExample(baseUrl, apiKey);
process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
if (answer === null) process.stderr.write('No subscriber cust_42 yet: run the README walk-through first.\n');
