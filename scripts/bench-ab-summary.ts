import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The summary of `npm run bench:ab` (scripts/bench-ab.sh): reads the rounds' logs (`A-<n>.log`, `B-<n>.log`) and
 * pairs the lines that print a ratio (a number followed by `x`, e.g. "throughput ratio: median 0.92x") by the text
 * before that number, so the same line of both builds is compared even when the rest of it differs. For each such
 * ratio it prints every round of A and of B, both medians, and whether they differ by more than the spread of the
 * rounds (the larger of the two sides' max - min): the question an A/B answers is whether B moved the benchmark
 * beyond what the host's noise moves it from round to round.
 */
type Side = 'A' | 'B';
const RATIO = /(-?\d+(?:\.\d+)?)x\b/;

/** Each ratio line of one log, keyed by its text before the ratio (digits as #), numbered when a key repeats. */
export function ratiosOf(log: string): Map<string, number> {
  const out = new Map<string, number>();
  const seen = new Map<string, number>();
  for (const line of log.split('\n')) {
    // A markdown table row repeats a figure its prose line prints: the prose line is the one compared.
    if (line.startsWith('|')) continue;
    const m = RATIO.exec(line);
    if (!m) continue;
    const base = line
      .slice(0, m.index)
      .replace(/\d+(\.\d+)?/g, '#')
      .replace(/\s+/g, ' ')
      .trim();
    if (!base) continue;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    out.set(n === 1 ? base : `${base} (${n})`, Number(m[1]));
  }
  return out;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export interface Comparison {
  line: string;
  a: number[];
  b: number[];
  verdict: 'within spread' | 'B higher' | 'B lower';
}

/** The ratios both sides printed in every round, compared. */
export function compare(rounds: Record<Side, Map<string, number>[]>): Comparison[] {
  const keys = [...(rounds.A[0]?.keys() ?? [])].filter((k) => [...rounds.A, ...rounds.B].every((r) => r.has(k)));
  return keys.map((line) => {
    const a = rounds.A.map((r) => r.get(line)!);
    const b = rounds.B.map((r) => r.get(line)!);
    const spread = Math.max(Math.max(...a) - Math.min(...a), Math.max(...b) - Math.min(...b));
    const delta = median(b) - median(a);
    const verdict = Math.abs(delta) <= spread ? 'within spread' : delta > 0 ? 'B higher' : 'B lower';
    return { line, a, b, verdict };
  });
}

function main(): void {
  const [dir, aName = 'A', bName = 'B'] = process.argv.slice(2);
  const rounds: Record<Side, Map<string, number>[]> = { A: [], B: [] };
  const files = readdirSync(dir)
    .filter((f) => /^[AB]-\d+\.log$/.test(f))
    .sort((x, y) => Number(x.slice(2, -4)) - Number(y.slice(2, -4)));
  for (const f of files) rounds[f[0] as Side].push(ratiosOf(readFileSync(path.join(dir, f), 'utf8')));
  const rows = compare(rounds);
  const f = (x: number) => x.toFixed(2);
  console.log(
    `\nA/B of ${path.basename(dir)}: A = ${aName}, B = ${bName}, ${rounds.A.length} rounds each (logs: ${dir})\n`,
  );
  console.log('| ratio printed as | A per round | A median | B per round | B median | B - A | verdict |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.line.replace(/\|/g, '/')} | ${r.a.map(f).join(', ')} | ${f(median(r.a))}x | ${r.b.map(f).join(', ')} | ${f(median(r.b))}x | ${f(median(r.b) - median(r.a))} | ${r.verdict} |`,
    );
  if (rows.length === 0)
    console.log('| (no ratio line printed by both builds in every round: compare the logs) | | | | | | |');
}

if (require.main === module) main();
