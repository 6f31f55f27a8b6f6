import { appendFileSync } from 'node:fs';
import type { FaultRunResult } from './fault-run';

/**
 * Prints a fault case's measured outcome (the checker's table), and appends its matrix row to the file named by
 * FAULTS_REPORT when set: `| case | acknowledged | delivered (min over subscriptions) | lost | duplicates | answers |`.
 */
export function reportCase(name: string, result: FaultRunResult, notes = ''): void {
  const delivered = Math.min(...result.subscriptions.map((s) => s.delivered));
  const row = `| ${name} | ${result.acknowledged} | ${delivered} | ${result.lost} | ${result.duplicates} | ${result.orderViolations} | ${JSON.stringify(result.answers)} | ${notes} |`;
  process.stdout.write(`\n[faults] ${name}\n${result.table}\nrow: ${row}\n`);
  if (process.env.FAULTS_REPORT) appendFileSync(process.env.FAULTS_REPORT, `${row}\n`);
}
