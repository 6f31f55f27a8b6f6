import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * `node dist/scripts/test-report.js OUT_DIR REPORT.json...`: the summary scripts/test.sh prints after its lanes,
 * from jest's JSON reports (`--json --outputFile`): per tier the spec files, the cases and the seconds its files
 * ran, the totals, and every case's name written to OUT_DIR/cases.txt (one `file :: full name` a line, sorted),
 * so two runs' sets of cases can be compared with `comm`. Exits non-zero when a report is missing or any case
 * failed or was skipped (a skipped case is a defect here, not a pass).
 */

interface AssertionResult {
  fullName: string;
  status: string;
  failureMessages?: string[];
}
interface FileResult {
  name: string;
  startTime: number;
  endTime: number;
  status: string;
  message: string;
  assertionResults: AssertionResult[];
}
interface JestReport {
  numRuntimeErrorTestSuites: number;
  testResults: FileResult[];
}

/** The tier a spec file belongs to, by the same paths jest.config.js gives its projects. */
export function tierOf(file: string): 'unit' | 'integration' | 'e2e' | 'faults' {
  if (file.startsWith('test/integration/')) return 'integration';
  if (file.startsWith('test/e2e/')) return 'e2e';
  if (file.startsWith('test/faults/') && file.endsWith('.e2e-spec.ts')) return 'faults';
  return 'unit';
}

export interface Summary {
  tiers: Map<string, { files: number; cases: number; seconds: number }>;
  passed: number;
  failed: number;
  skipped: number;
  brokenFiles: string[];
  cases: string[];
  /** Each failed case with the head of its first failure message, printed last: a CI log's tail then names it. */
  failures: string[];
}

/** Lines of a failure message kept in the summary: the assertion and the top of its stack. */
const FAILURE_LINES = 14;

function failureOf(name: string, a: AssertionResult): string {
  const message = (a.failureMessages?.[0] ?? '')
    // eslint-disable-next-line no-control-regex -- the terminal colour codes jest writes into its messages
    .replace(/\u001b\[[0-9;]*m/g, '')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, FAILURE_LINES)
    .map((line) => `[test]     ${line}`);
  return [`[test] FAILED ${name} :: ${a.fullName}`, ...message].join('\n');
}

export function summarize(root: string, reports: JestReport[]): Summary {
  const summary: Summary = {
    tiers: new Map(),
    passed: 0,
    failed: 0,
    skipped: 0,
    brokenFiles: [],
    cases: [],
    failures: [],
  };
  for (const report of reports) {
    for (const file of report.testResults) {
      const name = path.relative(root, file.name);
      const tier = summary.tiers.get(tierOf(name)) ?? { files: 0, cases: 0, seconds: 0 };
      tier.files += 1;
      tier.cases += file.assertionResults.length;
      tier.seconds += (file.endTime - file.startTime) / 1000;
      summary.tiers.set(tierOf(name), tier);
      // A file that failed outside its cases (a hook, a compile error) has no failed case to count.
      if (file.status === 'failed' && file.assertionResults.every((a) => a.status !== 'failed'))
        summary.brokenFiles.push(name);
      for (const a of file.assertionResults) {
        summary.cases.push(`${name} :: ${a.fullName}`);
        if (a.status === 'passed') summary.passed += 1;
        else if (a.status === 'failed') {
          summary.failed += 1;
          summary.failures.push(failureOf(name, a));
        } else summary.skipped += 1;
      }
    }
  }
  summary.cases.sort();
  return summary;
}

if (require.main === module) {
  const [outDir, ...files] = process.argv.slice(2);
  const root = path.resolve(__dirname, '../..');
  const reports: JestReport[] = [];
  const missing: string[] = [];
  for (const f of files) {
    try {
      reports.push(JSON.parse(readFileSync(f, 'utf8')) as JestReport);
    } catch {
      missing.push(f);
    }
  }
  const s = summarize(root, reports);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'cases.txt'), s.cases.join('\n') + '\n');
  const out = process.stdout;
  out.write('\n[test] tier          files  cases  seconds (sum of its files)\n');
  for (const tier of ['unit', 'integration', 'e2e', 'faults']) {
    const t = s.tiers.get(tier);
    if (t)
      out.write(
        `[test] ${tier.padEnd(12)} ${String(t.files).padStart(6)} ${String(t.cases).padStart(6)} ${t.seconds.toFixed(1).padStart(8)}\n`,
      );
  }
  out.write(
    `[test] jest: ${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped; case names in ${path.relative(process.cwd(), path.join(outDir, 'cases.txt'))}\n`,
  );
  for (const f of s.failures) out.write(`${f}\n`);
  for (const f of s.brokenFiles) out.write(`[test] FAILED outside its cases: ${f}\n`);
  for (const f of missing) out.write(`[test] no jest report at ${f} (the lane did not get as far as jest)\n`);
  process.exitCode = s.failed > 0 || s.skipped > 0 || s.brokenFiles.length > 0 || missing.length > 0 ? 1 : 0;
}
