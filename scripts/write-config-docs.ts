import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describeSettings } from '@libs/config';

/** Rewrites the settings table of docs/configuration.md from the configuration code (`npm run docs:config`). */
export function settingsTable(): string {
  const rows = describeSettings().map(
    (s) => `| \`${s.env}\` | \`${s.key}\` | \`${s.default || '(empty)'}\` | ${s.doc} |`,
  );
  return ['| Environment variable | Name | Default | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

export const BEGIN = '<!-- settings:begin (npm run docs:config) -->';
export const END = '<!-- settings:end -->';

if (require.main === module) {
  const file = path.resolve(__dirname, '../../docs/configuration.md');
  const text = readFileSync(file, 'utf8');
  const start = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (start < 0 || end < 0) throw new Error(`docs/configuration.md lacks the ${BEGIN} ... ${END} markers`);
  writeFileSync(file, `${text.slice(0, start + BEGIN.length)}\n${settingsTable()}\n${text.slice(end)}`);
  process.stdout.write('docs/configuration.md: settings table rewritten\n');
}
