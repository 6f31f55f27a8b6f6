/**
 * The metric names a PromQL expression reads, for the check that the Grafana dashboard (docs/grafana-dashboard.json)
 * queries only series the runtime exports. A small strict reader, not a PromQL engine: it tokenizes the expression,
 * refuses unbalanced brackets and any identifier that is neither a function, an aggregation, a keyword nor a
 * metric name, and skips what names labels (matchers in braces, `by (...)`, `on (...)`, ...), strings, numbers and
 * durations. What it returns are the identifiers in selector position.
 */
const FUNCTIONS = new Set([
  'abs',
  'absent',
  'absent_over_time',
  'avg_over_time',
  'ceil',
  'changes',
  'clamp',
  'clamp_max',
  'clamp_min',
  'count_over_time',
  'delta',
  'deriv',
  'exp',
  'floor',
  'histogram_quantile',
  'idelta',
  'increase',
  'irate',
  'label_replace',
  'last_over_time',
  'ln',
  'max_over_time',
  'min_over_time',
  'predict_linear',
  'quantile_over_time',
  'rate',
  'resets',
  'round',
  'scalar',
  'sort',
  'sort_desc',
  'sqrt',
  'sum_over_time',
  'time',
  'timestamp',
  'vector',
]);
const AGGREGATIONS = new Set([
  'sum',
  'avg',
  'min',
  'max',
  'count',
  'stddev',
  'stdvar',
  'topk',
  'bottomk',
  'quantile',
  'count_values',
  'group',
]);
/** Keywords followed by a parenthesised list of label names. */
const LABEL_LISTS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const OPERATORS = new Set(['and', 'or', 'unless', 'bool', 'offset']);

export function metricNamesOf(expr: string): string[] {
  const names: string[] = [];
  const stack: string[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new Error(`${why} at ${i} in ${JSON.stringify(expr)}`);
  };
  const skipLabelList = () => {
    while (/\s/.test(expr[i] ?? '')) i++;
    if (expr[i] !== '(') {
      // group_left / group_right may stand without a list.
      return;
    }
    const end = expr.indexOf(')', i);
    if (end < 0) fail('unclosed label list');
    const labels = expr
      .slice(i + 1, end)
      .split(',')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    for (const l of labels) if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(l)) fail(`bad label name ${JSON.stringify(l)}`);
    i = end + 1;
  };
  while (i < expr.length) {
    const c = expr[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '"' || c === "'") {
      const end = expr.indexOf(c, i + 1);
      if (end < 0) fail('unterminated string');
      i = end + 1;
    } else if (c === '{') {
      // Label matchers: name op "value", ...
      const end = expr.indexOf('}', i);
      if (end < 0) fail('unclosed {');
      const body = expr.slice(i + 1, end).trim();
      if (body !== '' && !/^([a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"[^"]*"\s*,?\s*)+$/.test(body))
        fail(`bad label matchers ${JSON.stringify(body)}`);
      i = end + 1;
    } else if (c === '[') {
      const end = expr.indexOf(']', i);
      if (end < 0 || !/^\d+[smhdwy](:\d*[smhdwy]?)?$|^\$__\w+$/.test(expr.slice(i + 1, end))) fail('bad range');
      i = end + 1;
    } else if (c === '(') {
      stack.push('(');
      i++;
    } else if (c === ')') {
      if (stack.pop() !== '(') fail('unbalanced )');
      i++;
    } else if (/[0-9.]/.test(c)) {
      const m = /^(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?/.exec(expr.slice(i)) ?? fail('bad number');
      i += m[0].length;
    } else if (/[+\-*/%^,<>=!]/.test(c)) {
      i++;
    } else if (/[a-zA-Z_:]/.test(c)) {
      const word = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(expr.slice(i))![0];
      i += word.length;
      let j = i;
      while (/\s/.test(expr[j] ?? '')) j++;
      const call = expr[j] === '(';
      if (LABEL_LISTS.has(word)) skipLabelList();
      else if (AGGREGATIONS.has(word) || FUNCTIONS.has(word)) {
        if (!call && !/^\s*(by|without)\b/.test(expr.slice(i))) fail(`${word} without its arguments`);
      } else if (OPERATORS.has(word)) {
        // and, or, unless, bool, offset
      } else if (call) fail(`unknown function ${word}`);
      else names.push(word);
    } else fail(`unexpected ${JSON.stringify(c)}`);
  }
  if (stack.length > 0) fail('unbalanced (');
  return names;
}
