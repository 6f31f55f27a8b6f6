import type { PartitionsView } from '@libs/ownership';
import { instanceWorkflowIdOf, type LeaveNotice } from '../../contracts';
import { uniqueTopic } from '../support/env';
import type { InstanceProcess } from '../support/instance-process';
import {
  closeOwnershipBed,
  msOf,
  openOwnershipBed,
  OwnershipBed,
  publishKeyed,
  startOwner,
} from '../support/ownership-bed';
import { waitFor } from '../support/wait-for';

/**
 * A crashed owner's partitions are taken over on its crash, not after its lease TTL: the process's Postgres
 * session ends with it, its liveness lock is released, and a peer ends its lease at once (libs/ownership,
 * crash-watch.ts). The TTL is a minute here, and the new owner must deliver while the old owner's lease has not
 * yet expired by its own records (its last heartbeat in Temporal, its last renewal in Postgres): a takeover by the
 * TTL cannot pass.
 */
const TTL_MS = 60_000;
const PARTITIONS = 2;

jest.setTimeout(240_000);

describe('PARTITION_OWNED_PULL: takeover on a crash, before the TTL', () => {
  const topic = uniqueTopic('crash');
  const instances = new Map<string, InstanceProcess>();
  let bed: OwnershipBed;
  let seq = 0;
  /** The load publishes while this is set (cleared in afterAll too, so a failed case leaves no load running). */
  let loading = false;

  const start = (id: string) => startOwner(instances, id, { topic, partitions: PARTITIONS, leaseTtlMs: TTL_MS });
  const publish = (via: InstanceProcess, count: number) =>
    publishKeyed(
      via,
      topic,
      '/crash',
      Array.from({ length: count }, () => ({ id: `c-${++seq}`, key: `k${seq}` })),
    );
  const firstDelivery = (id: string) => bed.receiver.requests.find((r) => r.headers['ce-id'] === id);

  beforeAll(async () => {
    bed = await openOwnershipBed('crash-takeover-e2e');
  });

  afterAll(async () => {
    loading = false;
    await closeOwnershipBed(bed, instances.values());
  });

  it('SIGKILL of an owner: its partition is delivered by the survivor while its lease is unexpired, and nothing acknowledged is lost', async () => {
    const c1 = await start('c1');
    const c2 = await start('c2');
    const created = await fetch(`${c1.url}/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sink: bed.receiver.url, topic, config: { trusted: true } }),
    });
    expect(created.status).toBe(201);
    const settled = await waitFor(
      'each instance to own and poll one partition',
      async () => {
        const view = (await (await fetch(`${c1.url}/admin/partitions`)).json()) as PartitionsView;
        // This spec's topic: the instances own the partitions of every topic the runtime serves (other specs' too).
        const mine = view.partitions.filter((p) => p.topic === topic);
        const rows = await bed.leases.list([topic]);
        const ok =
          mine.length === PARTITIONS &&
          mine.every((p) => p.polling && rows.find((r) => r.partition === p.partition)?.owner === p.owner) &&
          new Set(rows.map((r) => r.owner)).size === PARTITIONS;
        return ok && rows;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const victim = settled.find((r) => r.owner === 'c2')!.partition;

    loading = true;
    const load = (async () => {
      const acked: { id: string; partition: number }[] = [];
      while (loading) acked.push(...(await publish(c1, 10)));
      return acked;
    })();
    await waitFor('load to be delivered', () => bed.receiver.requests.length > 20, { timeoutMs: 60_000 });

    // The victim's lease expires a TTL after its last sign of life: the lease activity's last heartbeat Temporal
    // recorded (heartbeats are throttled to a third of the TTL) and the epoch's last renewal in Postgres. Read
    // before the kill, so a later sign of life could only make it expire later than this.
    const lease = await bed.temporal.client.workflow.getHandle(instanceWorkflowIdOf('c2')).describe();
    const activity = lease.raw.pendingActivities?.[0];
    const heartbeatAt = msOf(activity?.lastHeartbeatTime ?? activity?.lastStartedTime);
    const before = (await bed.leases.list([topic])).find((r) => r.partition === victim)!;
    const expiresAt = Math.min(heartbeatAt, before.renewedAt!.getTime()) + TTL_MS;
    expect(expiresAt).toBeGreaterThan(Date.now());
    c2.child.kill('SIGKILL');
    expect((await c2.exit(60_000)).signal).toBe('SIGKILL');
    const killedAt = Date.now();

    const afterKill = await publish(c1, 20);
    const ofVictim = afterKill.filter((e) => e.partition === victim);
    expect(ofVictim.length).toBeGreaterThan(0);
    const delivered = await waitFor(
      `an event of partition ${victim} published after the kill to be delivered before c2's lease expires`,
      () => firstDelivery(ofVictim[0].id),
      { timeoutMs: Math.max(0, expiresAt - Date.now()), intervalMs: 50 },
    );
    expect(delivered.receivedAt).toBeGreaterThan(killedAt);
    expect(delivered.receivedAt).toBeLessThan(expiresAt);

    // It went through the crash path: c2's lease ended as lost on its released liveness lock, and c1 claimed the
    // next epoch (the fence refuses anything c2's epoch would write).
    const notice = (await bed.temporal.client.workflow.getHandle(instanceWorkflowIdOf('c2')).result()) as LeaveNotice;
    expect(notice).toMatchObject({ reason: 'lost', detail: expect.stringContaining('liveness lock was released') });
    const after = (await bed.leases.list([topic])).find((r) => r.partition === victim)!;
    expect(after.owner).toBe('c1');
    expect(after.epoch).toBeGreaterThan(before.epoch);

    loading = false;
    const acked = [...(await load), ...afterKill];
    await waitFor(
      'every acknowledged event to be delivered at least once',
      () => acked.every((e) => firstDelivery(e.id)),
      {
        timeoutMs: 60_000,
      },
    );
    expect(acked.length).toBeGreaterThan(0);
  });
});
