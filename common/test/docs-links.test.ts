import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const documents = [
  'README.md',
  'SECURITY.md',
  'deploy/README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The text a reader sees as Markdown: fenced code blocks and inline code hold no links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const withoutFences = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const [, heading] of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = heading!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
    seen.set(slug, count + 1);
  }
  return anchors;
}

/** Every relative link target (`[text](target)`, images included) of a document. */
function linksOf(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((match) => match[1]!)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('documentation links', () => {
  it('finds the documents and their links (the checks below have something to check)', () => {
    expect(documents).toEqual(expect.arrayContaining(['docs/operations.md', 'docs/benchmarks.md']));
    expect(linksOf(readFileSync(join(root, 'README.md'), 'utf8')).length).toBeGreaterThan(10);
    expect(anchorsOf('## `entctl`\n## Secrets at rest (issue 12)\n## Usage\n## Usage')).toEqual(
      new Set(['entctl', 'secrets-at-rest-issue-12', 'usage', 'usage-1']),
    );
  });

  it.each(documents)('%s: every relative link names an existing file and heading', (document) => {
    const broken: string[] = [];
    const text = readFileSync(join(root, document), 'utf8');
    for (const target of linksOf(text)) {
      const [path = '', anchor] = target.split('#');
      const file = path === '' ? join(root, document) : join(root, dirname(document), decodeURI(path));
      if (!existsSync(file)) {
        broken.push(`${target}: no file ${relative(root, file)}`);
        continue;
      }
      if (anchor === undefined || !file.endsWith('.md')) continue;
      if (!anchorsOf(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${target}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});

describe('the README', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  it('is read in five minutes: at most 260 lines, its sections in a newcomer’s order', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(260);
    const sections = [...readme.matchAll(/^## (.+)$/gm)].map((match) => match[1]);
    expect(sections).toEqual([
      'Quick start',
      'Walk-through',
      '`entctl`',
      'Use it from your code',
      'The console',
      'Configuration',
      'Architecture',
      'Figures',
      'Documentation',
    ]);
  });

  it('lists every document of docs/ and SECURITY.md under Documentation', () => {
    const index = readme.slice(readme.indexOf('## Documentation'));
    for (const document of [...documents.filter((path) => path.startsWith('docs/')), 'SECURITY.md'])
      expect(index, document).toContain(`](${document})`);
  });
});
