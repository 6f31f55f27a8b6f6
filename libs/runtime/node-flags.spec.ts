import { readFileSync } from 'node:fs';
import path from 'node:path';
import { INSTANCE_NODE_FLAGS } from './node-flags';

describe('INSTANCE_NODE_FLAGS: every way an instance is started runs it with the same flags', () => {
  const root = path.resolve(__dirname, '../..');
  const starts: [string, RegExp][] = [
    ['scripts/run.sh', /^node (.*)dist\/apps\/instance\/src\/main\.js/m],
    ['scripts/fuzz-api.sh', /^\s*node (.*)dist\/apps\/instance\/src\/main\.js/m],
    ['scripts/a2a-tck.sh', /^\s*node (.*)dist\/apps\/instance\/src\/main\.js/m],
    ['docker/Dockerfile', /^CMD \["node", (.*)"dist\/apps\/instance\/src\/main\.js"\]/m],
  ];

  it.each(starts)('%s', (file, command) => {
    const found = command.exec(readFileSync(path.join(root, file), 'utf8'));
    expect(found).not.toBeNull();
    const flags = found![1].replace(/[",]/g, ' ').split(/\s+/).filter(Boolean);
    expect(flags).toEqual([...INSTANCE_NODE_FLAGS]);
  });
});
