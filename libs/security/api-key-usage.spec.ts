import type { ApiKeyUse } from '@libs/storage/api-key-store';
import { ApiKeyUsage, ApiKeyUseWriter } from './api-key-usage';

class Writer implements ApiKeyUseWriter {
  readonly batches: ApiKeyUse[][] = [];
  fail = false;
  async recordUse(uses: ApiKeyUse[]): Promise<string[]> {
    if (this.fail) throw new Error('Postgres is down');
    this.batches.push(uses);
    return uses.map((u) => u.id);
  }
}

describe('ApiKeyUsage', () => {
  let now = 0;
  const make = (writer: Writer) => new ApiKeyUsage(writer, { flushMs: 3_600_000, now: () => now });
  beforeEach(() => (now = Date.parse('2026-12-01T08:00:00Z')));

  it('writes nothing on use, then one batch with each key once, and a key again only a minute later', async () => {
    const writer = new Writer();
    const usage = make(writer);
    for (let i = 0; i < 1000; i++) usage.used(i % 2 ? 'a' : 'b');
    expect(writer.batches).toEqual([]);
    await usage.flush();
    expect(writer.batches).toEqual([
      [
        { id: 'b', at: new Date(now) },
        { id: 'a', at: new Date(now) },
      ],
    ]);
    now += 59_999;
    usage.used('a');
    await usage.flush();
    expect(writer.batches).toHaveLength(1);
    now += 1;
    usage.used('a');
    await usage.close();
    expect(writer.batches[1]).toEqual([{ id: 'a', at: new Date(now) }]);
  });

  it('keeps the uses of a failed write for the next flush', async () => {
    const writer = new Writer();
    const usage = make(writer);
    usage.used('a');
    writer.fail = true;
    await usage.flush();
    writer.fail = false;
    await usage.close();
    expect(writer.batches).toEqual([[{ id: 'a', at: new Date(now) }]]);
  });
});
