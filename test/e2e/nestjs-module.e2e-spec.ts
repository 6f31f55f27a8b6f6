import { Injectable, INestApplication, Type } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { Client } from '@temporalio/client';
import { CloudEvent } from 'cloudevents';
import { EventMeshClient } from '@eventmesh/client';
import { EventMeshModule, MeshData, MeshHandlerExplorer, MeshResponder, OnMeshEvent } from '@eventmesh/nestjs';
import { randomUUID } from 'node:crypto';
import { dispatchWorkflowIdOf } from '@libs/temporal';
import { uniqueTopic } from '../support/env';
import { InstanceProcess } from '../support/instance-process';
import { temporalClient, terminateWorkflows } from '../support/temporal';
import { waitFor } from '../support/wait-for';

const topic = uniqueTopic('nest');
const prices = uniqueTopic('nest-rr');

/** The app's handlers: what each one saw, and a way to make one fail or hold. */
@Injectable()
class Handlers {
  orders: { id: string; attempt: number }[] = [];
  failFirst = new Set<string>();
  hold?: { id: string; started: boolean; release: Promise<void> };
  finished: string[] = [];

  @OnMeshEvent({ topic, filter: { exact: { type: 'order.created' } } })
  async onOrder(event: CloudEvent<{ n: number }>) {
    this.orders.push({ id: event.id, attempt: this.orders.filter((o) => o.id === event.id).length + 1 });
    if (this.failFirst.delete(event.id)) throw new Error('first attempt fails');
    if (this.hold?.id === event.id) {
      this.hold.started = true;
      await this.hold.release;
    }
    this.finished.push(event.id);
  }

  @MeshResponder({ topic: prices })
  price(@MeshData('sku') sku: string) {
    return { sku, price: sku.length * 10 };
  }
}

/** A second handler with the same topic and filter as `Handlers.onOrder`, under its own name: its own subscription. */
@Injectable()
class AuditHandler {
  seen: string[] = [];

  @OnMeshEvent({ topic, filter: { exact: { type: 'order.created' } }, name: 'audit' })
  onOrder(event: CloudEvent<unknown>) {
    this.seen.push(event.id);
  }
}

/** A handler of a topic the instance does not serve. */
@Injectable()
class UnservedTopicHandler {
  @OnMeshEvent({ topic: uniqueTopic('nest-unserved') })
  handle() {}
}

/**
 * The NestJS module against a real instance process: a Nest app configured through ConfigService, its decorated
 * handler consuming a stream subscription the module created, its responder answering request-reply, a throw
 * answered with a nack (the event comes again), and a handler in flight at `app.close()` finished and acked.
 */
describe('@eventmesh/nestjs against a real instance', () => {
  const instanceId = `nest-${randomUUID().slice(0, 6)}`;
  let instance: InstanceProcess;
  let url: string;
  let temporal: { client: Client; close(): Promise<void> };
  let app: INestApplication;
  let closed = false;
  let handlers: Handlers;
  let mesh: EventMeshClient;

  /** The app, not yet initialized (`init()` runs the bootstrap: subscriptions and consumers). */
  const create = async (providers: Type[]) => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ MESH_URL: url })] }),
        EventMeshModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({ url: config.getOrThrow<string>('MESH_URL') }),
        }),
      ],
      providers,
    }).compile();
    return moduleRef.createNestApplication(new FastifyAdapter(), { logger: false });
  };
  const boot = async (providers: Type[] = [Handlers, AuditHandler]) => (await create(providers)).init();

  /** The lag of the subscriptions of `topic` (those of `Handlers.onOrder` and `AuditHandler.onOrder`), summed. */
  const lag = async () => {
    const list = (await (await fetch(`${url}/subscriptions`)).json()) as { id: string; topic: string }[];
    let sum = 0;
    for (const subscription of list.filter((s) => s.topic === topic)) {
      const offsets = (await (await fetch(`${url}/subscriptions/${subscription.id}/offsets`)).json()) as {
        partitions: { lag: number | null }[];
      };
      sum += offsets.partitions.reduce((n, p) => n + (p.lag ?? 0), 0);
    }
    return sum;
  };

  beforeAll(async () => {
    temporal = await temporalClient();
    instance = InstanceProcess.spawn({
      EVENTMESH_INSTANCE_ID: instanceId,
      EVENTMESH_KAFKA_TOPICS: `${topic},${prices}`,
    });
    url = await instance.ready();
    app = await boot();
    handlers = app.get(Handlers);
    mesh = app.get(EventMeshClient);
  }, 120000);

  afterAll(async () => {
    if (!closed) await app?.close();
    await instance?.stop();
    await terminateWorkflows(temporal.client, [dispatchWorkflowIdOf(instanceId)]);
    await temporal.close();
  });

  it('created one stream subscription per decorated method, named by it and filtered by its filter only (two with the same topic and filter, by name), and a second boot finds them instead of creating more', async () => {
    type View = { name?: string; topic: string; protocol: string; filters: unknown[] };
    const ours = async () =>
      ((await (await fetch(`${url}/subscriptions`)).json()) as View[])
        .filter((s) => s.topic === topic || s.topic === prices)
        .map((s) => [s.name, s.topic, s.protocol, s.filters])
        .sort();
    const created = [
      ['Handlers.onOrder', topic, 'STREAM', [{ exact: { type: 'order.created' } }]],
      ['Handlers.price', prices, 'STREAM', []],
      ['audit', topic, 'STREAM', [{ exact: { type: 'order.created' } }]],
    ];
    expect(await ours()).toEqual(created);
    const second = await boot();
    await second.close();
    expect(await ours()).toEqual(created);
  });

  it("fails the bootstrap when the runtime refuses a handler's subscription (a topic it does not serve), and closes the consumers it started", async () => {
    const failed = await create([Handlers, AuditHandler, UnservedTopicHandler]);
    // The app's own handlers start first (their consumers connect), then the unserved topic's fails.
    await expect(failed.init()).rejects.toMatchObject({ code: 'UNKNOWN_TOPIC', status: 404 });
    expect(
      failed
        .get(MeshHandlerExplorer)
        .consumerStates()
        .map((c) => [c.subscription, c.state]),
    ).toEqual([
      ['Handlers.onOrder', 'closed'],
      ['Handlers.price', 'closed'],
      ['audit', 'closed'],
    ]);
  });

  it('delivers an event published through the injected client to each decorated handler of its topic', async () => {
    const { id } = await mesh.publish({ type: 'order.created', source: '/e2e', data: { n: 1 } }, { topic });
    await waitFor(
      'both handlers to finish the event',
      () => handlers.finished.includes(id) && app.get(AuditHandler).seen.includes(id),
      { timeoutMs: 60000 },
    );
    expect(handlers.orders.filter((o) => o.id === id)).toEqual([{ id, attempt: 1 }]);
  }, 120000);

  it("answers a request with the responder method's return value", async () => {
    const reply = await mesh.request(
      { type: 'price.asked', source: '/e2e', data: { sku: 'abc' } },
      { topic: prices, timeoutMs: 60000 },
    );
    expect(reply).toMatchObject({ type: 'price.asked.reply', data: { sku: 'abc', price: 30 } });
  }, 120000);

  it('nacks a handler that throws: the event comes again and is handled', async () => {
    const id = randomUUID();
    handlers.failFirst.add(id);
    await mesh.publish({ id, type: 'order.created', source: '/e2e', data: { n: 2 } }, { topic });
    await waitFor('the handler to finish the event on its second attempt', () => handlers.finished.includes(id), {
      timeoutMs: 60000,
    });
    expect(handlers.orders.filter((o) => o.id === id).map((o) => o.attempt)).toEqual([1, 2]);
  }, 120000);

  it('at app.close(), finishes the handler in flight and acks its event before the app is closed', async () => {
    const id = randomUUID();
    let release!: () => void;
    handlers.hold = { id, started: false, release: new Promise((r) => (release = r)) };
    await mesh.publish({ id, type: 'order.created', source: '/e2e', data: { n: 3 } }, { topic });
    await waitFor('the handler to hold the event', () => handlers.hold!.started, { timeoutMs: 60000 });
    // The other subscription of the topic has its copy in hand too: one that arrived after the drain began would be
    // left unanswered by design (closing gives it back, for the next consumer), and the lag below would count it.
    await waitFor('the audit handler to have the event', () => app.get(AuditHandler).seen.includes(id), {
      timeoutMs: 60000,
    });
    // The handler is let go once the module drains (or the app closed without waiting for it): the app must not
    // be closed before the handler finished.
    let finishedWhenClosed: boolean | undefined;
    const closing = app.close().then(() => (finishedWhenClosed = handlers.finished.includes(id)));
    closed = true;
    const draining = () =>
      app
        .get(MeshHandlerExplorer)
        .consumerStates()
        .some((c) => c.state === 'draining');
    await waitFor('the module to drain, or the app to close', () => draining() || finishedWhenClosed !== undefined, {
      timeoutMs: 60000,
    });
    release();
    await closing;
    expect(finishedWhenClosed).toBe(true);
    // The ack reached the runtime before the consumer closed: the subscription's committed offset reaches the end.
    await waitFor('the subscription to have no lag', async () => (await lag()) === 0, { timeoutMs: 60000 });
  }, 180000);
});
