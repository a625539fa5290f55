import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { generatedSource } from './generated-source.ts';

const target = fileURLToPath(new URL('../src/generated/api.ts', import.meta.url));
await writeFile(target, await generatedSource());
console.log(`wrote ${target}`);
