import type { Client } from '@temporalio/client';
import type { DataSource } from 'typeorm';
import { createDataSource, LeaseStore } from '@libs/storage';
import { testConfig } from './env';
import { InstanceProcess } from './instance-process';
import { resetOwnership, temporalClient } from './temporal';
import { WebhookReceiver } from './webhook-receiver';

/**
 * What the PARTITION_OWNED_PULL e2e specs share: a Temporal client on a namespace without ownership workflows, the
 * lease table to read owners and epochs from, and a webhook sink.
 */
export interface OwnershipBed {
  temporal: { client: Client; close(): Promise<void> };
  db: DataSource;
  leases: LeaseStore;
  receiver: WebhookReceiver;
}

export async function openOwnershipBed(applicationName: string): Promise<OwnershipBed> {
  const temporal = await temporalClient();
  await resetOwnership(temporal.client);
  const db = createDataSource(testConfig().postgres, applicationName);
  await db.initialize();
  const receiver = new WebhookReceiver();
  await receiver.start();
  return { temporal, db, leases: new LeaseStore(db), receiver };
}

/** Stops the instances (a stopped one is continued first), ends the ownership workflows, and closes the bed. */
export async function closeOwnershipBed(bed: OwnershipBed, instances: Iterable<InstanceProcess>): Promise<void> {
  const all = [...instances];
  for (const i of all) if (i.child.signalCode === 'SIGSTOP') i.child.kill('SIGCONT');
  await Promise.all(all.map((i) => i.stop()));
  await resetOwnership(bed.temporal.client);
  await Promise.all([bed.receiver.stop(), bed.db.destroy(), bed.temporal.close()]);
}

/** Publishes one event per `{ id, key }` through `via`; answers the ids Kafka acknowledged, with their partitions. */
export async function publishKeyed(
  via: InstanceProcess,
  topic: string,
  source: string,
  events: { id: string; key: string }[],
): Promise<{ id: string; partition: number }[]> {
  const acked: { id: string; partition: number }[] = [];
  for (const { id, key } of events) {
    const response = await fetch(`${via.url}/events/publish?topic=${topic}`, {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id, source, type: `${source.slice(1)}.n`, partitionkey: key }),
    }).catch(() => undefined);
    if (response?.status === 202)
      acked.push({ id, partition: ((await response.json()) as { partition: number }).partition });
  }
  return acked;
}

/** A protobuf timestamp or duration in ms (seconds may come as a Long). */
export const msOf = (ts: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  ts ? Number(String(ts.seconds ?? 0)) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6) : NaN;

/** Starts instance `id` as a partition owner of `topic` (added to `instances`), once it answers. */
export async function startOwner(
  instances: Map<string, InstanceProcess>,
  id: string,
  options: { topic: string; partitions: number; leaseTtlMs: number; env?: Record<string, string> },
): Promise<InstanceProcess> {
  const instance = InstanceProcess.spawn({
    EVENTMESH_INSTANCE_ID: id,
    EVENTMESH_DELIVERY_TOPOLOGY: 'PARTITION_OWNED_PULL',
    EVENTMESH_DELIVERY_LEASE_TTL_MS: String(options.leaseTtlMs),
    EVENTMESH_KAFKA_TOPICS: options.topic,
    EVENTMESH_KAFKA_TOPIC_PARTITIONS: String(options.partitions),
    ...options.env,
  });
  instances.set(id, instance);
  await instance.ready();
  return instance;
}
