#!/usr/bin/env bash
# `npm run lint:boundaries`: the boundary rules of .dependency-cruiser.cjs over the tree (docs/architecture.md#boundaries).
# Fails on a violation not listed in .dependency-cruiser-known-violations.json, the violations the tree had when the
# rules were written; prints the known ones per rule, and how many listed ones are gone (then regenerate the list:
# `npx depcruise-baseline --config .dependency-cruiser.cjs .`, and commit it: the list only shrinks).
# dependency-cruiser's own --ignore-known does not apply the list to folder-level rules (no-cycle-between-units);
# the few lines of node below do, by rule, from-folder and to-folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
known=.dependency-cruiser-known-violations.json
result=$(mktemp)
trap 'rm -f "$result"' EXIT
npx depcruise --config .dependency-cruiser.cjs --ignore-known "$known" --output-type json . >"$result" || true

node - "$result" "$known" <<'JS'
const fs = require('node:fs');
const [resultFile, knownFile] = process.argv.slice(2);
const { summary } = JSON.parse(fs.readFileSync(resultFile, 'utf8'));
const known = JSON.parse(fs.readFileSync(knownFile, 'utf8'));
const key = (v) => `${v.rule.name} ${v.from} ${v.to}`;
const knownKeys = new Set(known.map(key));
const seen = new Set(summary.violations.map(key));
const fresh = summary.violations.filter((v) => v.rule.severity !== 'ignore' && !knownKeys.has(key(v)));
const perRule = {};
for (const v of summary.violations) if (!fresh.includes(v)) perRule[v.rule.name] = (perRule[v.rule.name] ?? 0) + 1;
const gone = known.filter((v) => !seen.has(key(v))).length;

console.log(`${summary.totalCruised} modules, ${summary.totalDependenciesCruised} dependencies cruised`);
console.log(`known violations: ${Object.values(perRule).reduce((a, b) => a + b, 0)} (${Object.entries(perRule).map(([r, n]) => `${r} ${n}`).join(', ') || 'none'})`);
if (gone) console.log(`${gone} listed in ${knownFile} no longer occur: regenerate the list (header of this script)`);
for (const v of fresh) {
  const via = v.cycle ? `, around ${[v.from, ...v.cycle.map((c) => c.name)].join(' -> ')}` : '';
  console.log(`NEW ${v.rule.name}: ${v.from} -> ${v.to}${via}`);
}
console.log(`new violations: ${fresh.length}`);
process.exitCode = fresh.length ? 1 : 0;
JS
