import 'reflect-metadata';
import {
  CallHandler,
  CanActivate,
  Catch,
  ExceptionFilter,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  PipeTransform,
  UseFilters,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { EventMeshClient, RejectError, RequestTimeoutError } from '@eventmesh/client';
import { CloudEvent } from 'cloudevents';
import { tap } from 'rxjs';
import {
  EVENT_MESH_OPTIONS,
  EventMeshModule,
  EventMeshTestingModule,
  InMemoryEventMeshClient,
  MESH_CONTEXT_TYPE,
  MeshData,
  MeshHandlerExplorer,
  MeshResponder,
  OnMeshEvent,
} from './index';

/** A pipe that proves pipes run on `@MeshData()`: it doubles the order's amount. */
class DoubleAmount implements PipeTransform {
  transform(value: { amount: number }) {
    return { ...value, amount: value.amount * 2 };
  }
}

/** A guard that lets through only events of the mesh context without `data.blocked`. */
@Injectable()
class NotBlocked implements CanActivate {
  static contexts: string[] = [];
  canActivate(context: ExecutionContext) {
    NotBlocked.contexts.push(context.getType());
    const [event] = context.getArgs<[CloudEvent<{ blocked?: boolean }>]>();
    return !event.data?.blocked;
  }
}

/** An interceptor that records the handler's results, as one would time or log them. */
@Injectable()
class Recorder implements NestInterceptor {
  static results: unknown[] = [];
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(tap((r) => Recorder.results.push(r)));
  }
}

@Injectable()
class OrdersHandler {
  seen: { amount: number }[] = [];
  failuresLeft = 0;
  release?: () => void;
  held?: Promise<void>;

  @OnMeshEvent({ topic: 'orders', filter: { exact: { type: 'order.created' } } })
  @UseInterceptors(Recorder)
  async onCreated(@MeshData(DoubleAmount) order: { amount: number }) {
    if (this.held) await this.held;
    if (this.failuresLeft-- > 0) throw new Error('transient');
    if (order.amount < 0) throw new RejectError('negative amount');
    this.seen.push(order);
    return 'handled';
  }

  @MeshResponder({ topic: 'prices' })
  price(@MeshData('sku') sku: string) {
    return { sku, price: sku.length * 10 };
  }
}

/** An error a handler may throw for an event it chose to skip. */
class AlreadyShipped extends Error {}

/** An exception filter that turns `AlreadyShipped` into a normal return (so the event is acked). */
@Catch(AlreadyShipped)
class SkipShipped implements ExceptionFilter {
  catch() {
    return 'skipped';
  }
}

@Injectable()
class ShippingHandler {
  @OnMeshEvent({ topic: 'shipments' })
  @UseFilters(SkipShipped)
  ship(@MeshData('shipped') shipped: boolean) {
    if (shipped) throw new AlreadyShipped();
    throw new Error('not shipped yet');
  }
}

@Injectable()
@UseGuards(NotBlocked)
class AuditHandler {
  seen: string[] = [];

  @OnMeshEvent({ topic: 'orders', name: 'audit' })
  audit(event: CloudEvent<unknown>) {
    this.seen.push(event.id);
  }
}

async function app() {
  const moduleRef = await Test.createTestingModule({
    imports: [EventMeshTestingModule.forRoot({ topic: 'orders', maxAttempts: 3 })],
    providers: [OrdersHandler, AuditHandler, ShippingHandler],
  }).compile();
  moduleRef.useLogger(false);
  const nest = await moduleRef.init();
  return {
    nest,
    mesh: nest.get(InMemoryEventMeshClient),
    orders: nest.get(OrdersHandler),
    audit: nest.get(AuditHandler),
  };
}

const created = (data: unknown) => ({ type: 'order.created', source: '/test', data });

describe('EventMeshModule with the in-memory client', () => {
  beforeEach(() => {
    Recorder.results = [];
    NotBlocked.contexts = [];
  });

  it('discovers the handlers of providers and calls each per event, through pipes, guards and interceptors', async () => {
    const { nest, mesh, orders, audit } = await app();
    await mesh.publish(created({ amount: 5 }));
    await mesh.publish({ type: 'order.cancelled', source: '/test', data: {} });
    await mesh.settled();
    expect(orders.seen).toEqual([{ amount: 10 }]);
    expect(Recorder.results).toEqual(['handled']);
    expect(audit.seen).toEqual(mesh.published.map((e) => e.id));
    expect(NotBlocked.contexts).toEqual([MESH_CONTEXT_TYPE, MESH_CONTEXT_TYPE]);
    expect(mesh.answers.map((a) => [a.subscription, a.action]).sort()).toEqual([
      ['OrdersHandler.onCreated', 'ack'],
      ['audit', 'ack'],
      ['audit', 'ack'],
    ]);
    await nest.close();
  });

  it('acks only after the handler resolved: a throw nacks and the event comes again, a RejectError dead-letters it', async () => {
    const { nest, mesh, orders } = await app();
    orders.failuresLeft = 1;
    await mesh.publish(created({ amount: 1 }));
    await mesh.publish(created({ amount: -1 }));
    await mesh.settled();
    const ordersAnswers = mesh.answers.filter((a) => a.subscription === 'OrdersHandler.onCreated');
    expect(ordersAnswers.map((a) => [a.event.data, a.attempt, a.action])).toEqual([
      [{ amount: 1 }, 1, 'nack'],
      [{ amount: -1 }, 1, 'reject'],
      [{ amount: 1 }, 2, 'ack'],
    ]);
    expect(orders.seen).toEqual([{ amount: 2 }]);
    expect(mesh.deadLetters.map((d) => d.event.data)).toEqual([{ amount: -1 }]);
    await nest.close();
  });

  it('nacks an event a guard refuses, so it is never acked unhandled', async () => {
    const { nest, mesh, audit } = await app();
    await mesh.publish({ type: 'x', source: '/test', data: { blocked: true } });
    await mesh.settled();
    expect(audit.seen).toEqual([]);
    expect(mesh.answers.filter((a) => a.subscription === 'audit').map((a) => a.action)).toEqual([
      'nack',
      'nack',
      'nack',
    ]);
    await nest.close();
  });

  it('runs exception filters: an error a filter handles acks the event, any other still nacks it', async () => {
    const { nest, mesh } = await app();
    await mesh.publish({ type: 's', source: '/test', data: { shipped: true } }, { topic: 'shipments' });
    await mesh.publish({ type: 's', source: '/test', data: { shipped: false } }, { topic: 'shipments' });
    await mesh.settled();
    const answers = mesh.answers.filter((a) => a.subscription === 'ShippingHandler.ship');
    expect(answers.filter((a) => (a.event.data as { shipped: boolean }).shipped).map((a) => a.action)).toEqual(['ack']);
    expect(answers.filter((a) => !(a.event.data as { shipped: boolean }).shipped).map((a) => a.action)).toEqual([
      'nack',
      'nack',
      'nack',
    ]);
    await nest.close();
  });

  it("answers a request with the responder method's return value", async () => {
    const { nest, mesh } = await app();
    const reply = await mesh.request(
      { type: 'price.asked', source: '/test', data: { sku: 'abcd' } },
      { topic: 'prices' },
    );
    expect(reply).toMatchObject({
      type: 'price.asked.reply',
      source: '/nestjs/OrdersHandler.price',
      data: { sku: 'abcd', price: 40 },
    });
    await mesh.publish({ type: 'price.asked', source: '/test', data: { sku: 'x' } }, { topic: 'prices' });
    await mesh.settled();
    expect(mesh.deadLetters.map((d) => [d.subscription, d.action])).toEqual([['OrdersHandler.price', 'reject']]);
    await nest.close();
  });

  it('rejects a request nobody answers with RequestTimeoutError, and refuses an sql filter it cannot evaluate', async () => {
    const { nest, mesh } = await app();
    await expect(
      mesh.request({ type: 'q', source: '/test' }, { topic: 'nobody', timeoutMs: 50 }),
    ).rejects.toBeInstanceOf(RequestTimeoutError);
    await expect(
      mesh.ensureStreamSubscription({ name: 'sql', topic: 'orders', filters: [{ sql: "type = 'x'" }] }),
    ).rejects.toThrow(/sql filters are not supported/);
    await nest.close();
  });

  it('at close, lets the handler in flight finish and acks it before the app is closed', async () => {
    const { nest, mesh, orders } = await app();
    orders.held = new Promise((resolve) => (orders.release = resolve));
    await mesh.publish(created({ amount: 3 }));
    // The handler is let go once the module drains (or the app closed without waiting for it).
    let finishedWhenClosed: boolean | undefined;
    const closing = nest.close().then(() => (finishedWhenClosed = orders.seen.length === 1));
    const draining = () =>
      nest
        .get(MeshHandlerExplorer)
        .consumerStates()
        .some((c) => c.state === 'draining');
    while (!draining() && finishedWhenClosed === undefined) await new Promise((r) => setImmediate(r));
    orders.release!();
    await closing;
    expect(finishedWhenClosed).toBe(true);
    expect(mesh.answers.find((a) => a.subscription === 'OrdersHandler.onCreated')).toMatchObject({
      action: 'ack',
      attempt: 1,
    });
  });
});

describe('EventMeshModule.forRoot / forRootAsync', () => {
  it('provides an EventMeshClient built from the options', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [EventMeshModule.forRoot({ url: 'http://127.0.0.1:1' })],
    }).compile();
    expect(moduleRef.get(EventMeshClient)).toBeInstanceOf(EventMeshClient);
    expect(moduleRef.get(EVENT_MESH_OPTIONS)).toEqual({ url: 'http://127.0.0.1:1' });
  });

  it('takes its options from ConfigService, and is global', async () => {
    @Injectable()
    class Publisher {
      constructor(readonly client: EventMeshClient) {}
    }
    @Module({ providers: [Publisher] })
    class FeatureModule {}
    const moduleRef = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ EVENTMESH_URL: 'http://127.0.0.1:2' })] }),
        EventMeshModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({ url: config.getOrThrow<string>('EVENTMESH_URL') }),
        }),
        FeatureModule,
      ],
    }).compile();
    expect(moduleRef.get(EVENT_MESH_OPTIONS)).toEqual({ url: 'http://127.0.0.1:2' });
    expect(moduleRef.get(Publisher).client).toBe(moduleRef.get(EventMeshClient));
  });
});
