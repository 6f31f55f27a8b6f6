import { EventMeshClient } from '@eventmesh/client';
import type { SourceRecord } from '../spi';
import { PublishLanes } from './publish-lanes';

/** A publish request held until the test answers it, with its events' ids. */
interface Held {
  ids: string[];
  answer: () => void;
}

/**
 * A runtime behind the real SDK: each publish request is held until the test answers it; `GET /limits` is not
 * answered (404), so the SDK's own batch bounds hold (500 events, 512 KiB).
 */
function heldRuntime(): { held: Held[]; inFlight: () => number; mesh: EventMeshClient } {
  const held: Held[] = [];
  let answered = 0;
  const fetch = (async (url: string | URL | Request, init: RequestInit = {}) => {
    if (new URL(String(url)).pathname === '/limits') return Response.json({ code: 'NOT_FOUND' }, { status: 404 });
    const body = JSON.parse(String(init.body)) as { id: string } | { id: string }[];
    const events = Array.isArray(body) ? body : [body];
    await new Promise<void>((answer) => held.push({ ids: events.map((e) => e.id), answer }));
    answered++;
    const results = events.map((e, i) => ({ id: e.id, topic: 't', partition: 0, offset: i }));
    return Response.json(Array.isArray(body) ? { results } : results[0], { status: 202 });
  }) as typeof globalThis.fetch;
  const mesh = new EventMeshClient({ url: 'http://mesh', fetch });
  return { held, inFlight: () => held.length - answered, mesh };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('PublishLanes: one aggregate in order through the real SDK', () => {
  it('sends a lane whose events take several requests one request at a time, in order', async () => {
    const { held, inFlight, mesh } = heldRuntime();
    // Six events of one aggregate, about 200 KB each: two to a request of the SDK's 512 KiB.
    const records: SourceRecord[] = [1, 2, 3, 4, 5, 6].map((n) => ({
      ok: true,
      topic: 't',
      event: { id: String(n), source: '/s', type: 'x', partitionkey: 'order-1', data: { pad: 'x'.repeat(200_000) } },
    }));
    const published = new PublishLanes(mesh).publish(records);
    let most = 0;
    for (let answered = 0; answered < 3; answered++) {
      await settle();
      most = Math.max(most, inFlight());
      held[answered].answer();
    }
    await expect(published).resolves.toEqual([]);
    expect(held.map((h) => h.ids)).toEqual([
      ['1', '2'],
      ['3', '4'],
      ['5', '6'],
    ]);
    expect(most).toBe(1);
  });
});
