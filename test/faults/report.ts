import { appendFileSync } from 'node:fs';
import type { FaultRunResult } from './fault-run';

/**
 * Prints a fault case's measured outcome (the checker's table), and appends its matrix row to the file named by
 * FAULTS_REPORT when set: `| case | acknowledged | delivered (min over subscriptions) | lost | duplicates | answers |`.
 */
export function reportCase(name: string, result: FaultRunResult, notes = ''): void {
  const delivered = Math.min(...result.subscriptions.map((s) => s.delivered));
  reportRow(name, result.table, [
    result.acknowledged,
    delivered,
    result.lost,
    result.duplicates,
    result.orderViolations,
    JSON.stringify(result.answers),
    notes,
  ]);
}

/**
 * Prints a case's details and its matrix row (`| case | ...cells |`, the columns of {@link reportCase}), and
 * appends the row to the file named by FAULTS_REPORT when set.
 */
export function reportRow(name: string, details: string, cells: (string | number)[]): void {
  const row = `| ${[name, ...cells].join(' | ')} |`;
  process.stdout.write(`\n[faults] ${name}\n${details}\nrow: ${row}\n`);
  if (process.env.FAULTS_REPORT) appendFileSync(process.env.FAULTS_REPORT, `${row}\n`);
}
