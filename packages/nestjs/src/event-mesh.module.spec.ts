import 'reflect-metadata';
import {
  CallHandler,
  CanActivate,
  Catch,
  Controller,
  ExceptionFilter,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  OnModuleDestroy,
  PipeTransform,
  Scope,
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
  EventMeshModuleOptions,
  EventMeshTestingModule,
  InMemoryEventMeshClient,
  MESH_CONTEXT_TYPE,
  MeshData,
  MeshHandlerExplorer,
  MeshResponder,
  OnMeshEvent,
} from './index';
import { MESH_CLIENT_PORT } from './mesh-client-port';

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

/** A Nest app's bootstrap with the in-memory client: `init()` rejects with what the module refused. */
async function boot(metadata: Parameters<typeof Test.createTestingModule>[0]) {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  moduleRef.useLogger(false);
  return moduleRef;
}

describe('EventMeshModule refuses at bootstrap what it could not run', () => {
  @Controller('orders')
  class OrdersController {
    @OnMeshEvent({ topic: 'orders' })
    onCreated() {}
  }

  @Injectable({ scope: Scope.REQUEST })
  class RequestScopedHandler {
    @OnMeshEvent({ topic: 'orders' })
    onCreated() {}
  }

  @Injectable({ scope: Scope.TRANSIENT })
  class TransientHandler {
    @MeshResponder({ topic: 'prices' })
    price() {}
  }

  it.each([
    [
      'a controller',
      { controllers: [OrdersController] },
      /@OnMeshEvent OrdersController\.onCreated .*controller.*move it to a singleton provider/,
    ],
    [
      'a request-scoped provider',
      { providers: [RequestScopedHandler] },
      /@OnMeshEvent RequestScopedHandler\.onCreated .*request-scoped.*move it to a singleton provider/,
    ],
    [
      'a transient provider',
      { providers: [TransientHandler] },
      /@MeshResponder TransientHandler\.price .*transient.*move it to a singleton provider/,
    ],
  ])('fails the bootstrap on a decorated method of %s, naming it', async (_what, metadata, message) => {
    const moduleRef = await boot({ imports: [EventMeshTestingModule.forRoot()], ...metadata });
    await expect(moduleRef.init()).rejects.toThrow(message);
  });

  it('fails the bootstrap when two handlers would share one subscription name, naming both', async () => {
    const feature = (moduleName: string) => {
      @Injectable()
      class EventsHandler {
        @OnMeshEvent({ topic: 'orders' })
        handle() {}
      }
      @Module({ providers: [EventsHandler] })
      class Feature {}
      Object.defineProperty(Feature, 'name', { value: moduleName });
      return Feature;
    };
    const moduleRef = await boot({
      imports: [EventMeshTestingModule.forRoot(), feature('BillingModule'), feature('ShippingModule')],
    });
    const mesh = moduleRef.get(InMemoryEventMeshClient);
    const ensure = jest.spyOn(mesh, 'ensureStreamSubscription');
    await expect(moduleRef.init()).rejects.toThrow(
      /EventsHandler\.handle \(BillingModule\) and @OnMeshEvent EventsHandler\.handle \(ShippingModule\) both consume the subscription "EventsHandler\.handle".*name:/,
    );
    expect(ensure).not.toHaveBeenCalled();
  });

  it.each([
    [{ concurrency: NaN }, '@OnMeshEvent Checked.on: concurrency must be an integer >= 1, got NaN'],
    [{ concurrency: 0 }, '@OnMeshEvent Checked.on: concurrency must be an integer >= 1, got 0'],
    [{ concurrency: 1.5 }, '@OnMeshEvent Checked.on: concurrency must be an integer >= 1, got 1.5'],
    [{ window: 0 }, '@OnMeshEvent Checked.on: window must be an integer from 1 to 1000, got 0'],
    [{ window: 1001 }, '@OnMeshEvent Checked.on: window must be an integer from 1 to 1000, got 1001'],
    [
      { policy: 'ROUND_ROBIN' },
      '@OnMeshEvent Checked.on: policy must be LOAD_BALANCE, BROADCAST or MULTICAST, got "ROUND_ROBIN"',
    ],
  ])('fails the bootstrap on %o, before ensuring any subscription', async (options, message) => {
    @Injectable()
    class Checked {
      @OnMeshEvent({ topic: 'orders', ...(options as object) })
      on() {}
    }
    const moduleRef = await boot({ imports: [EventMeshTestingModule.forRoot()], providers: [OrdersHandler, Checked] });
    const ensure = jest.spyOn(moduleRef.get(InMemoryEventMeshClient), 'ensureStreamSubscription');
    await expect(moduleRef.init()).rejects.toThrow(message);
    expect(ensure).not.toHaveBeenCalled();
  });

  it.each([
    ['forRoot({})', () => EventMeshModule.forRoot({} as EventMeshModuleOptions), 'got undefined'],
    [
      'a factory giving url undefined',
      () => EventMeshModule.forRootAsync({ useFactory: () => ({ url: undefined as unknown as string }) }),
      'got undefined',
    ],
    ['a url without a scheme', () => EventMeshModule.forRoot({ url: 'localhost:8080' }), 'got "localhost:8080"'],
    [
      'a url of another scheme',
      () => EventMeshModule.forRoot({ url: 'ws://127.0.0.1:8080' }),
      'got "ws://127.0.0.1:8080"',
    ],
    [
      'a url without a scheme, its user information not shown',
      () => EventMeshModule.forRoot({ url: 'mesh:s3cret@127.0.0.1:8080' }),
      'got "***@127.0.0.1:8080"',
    ],
  ])('refuses %s: options.url must be an http(s) URL', async (_what, module, got) => {
    await expect(Test.createTestingModule({ imports: [module()] }).compile()).rejects.toThrow(
      `EventMeshModule: options.url must be an http(s) URL such as http://127.0.0.1:8080, ${got}`,
    );
  });

  it('refuses a token or an apiKey that is not a string', async () => {
    const bad = (options: Partial<EventMeshModuleOptions>) =>
      Test.createTestingModule({
        imports: [EventMeshModule.forRoot({ url: 'http://127.0.0.1:1', ...options } as EventMeshModuleOptions)],
      }).compile();
    await expect(bad({ token: 42 as unknown as string })).rejects.toThrow(
      'EventMeshModule: options.token must be a string or a function giving one, got a number',
    );
    await expect(bad({ apiKey: {} as unknown as string })).rejects.toThrow(
      'EventMeshModule: options.apiKey must be a string, got an object',
    );
    await expect(bad({ token: () => 't', apiKey: 'emk_a_b' })).resolves.toBeDefined();
  });
});

describe('EventMeshModule instances with isGlobal: false', () => {
  /** Two feature modules, each with its own EventMeshModule and a handler of topic `orders`; each client in-memory. */
  const twoFeatures = () => {
    @Injectable()
    class BillingHandler {
      seen: string[] = [];
      @OnMeshEvent({ topic: 'orders' })
      on(event: CloudEvent<unknown>) {
        this.seen.push(event.id);
      }
    }
    @Injectable()
    class ShippingHandler {
      seen: string[] = [];
      @OnMeshEvent({ topic: 'orders' })
      on(event: CloudEvent<unknown>) {
        this.seen.push(event.id);
      }
    }
    @Module({
      imports: [EventMeshModule.forRoot({ url: 'http://billing.invalid', isGlobal: false })],
      providers: [BillingHandler],
    })
    class BillingModule {}
    @Module({
      imports: [EventMeshModule.forRoot({ url: 'http://shipping.invalid', isGlobal: false })],
      providers: [ShippingHandler],
    })
    class ShippingModule {}
    return { BillingHandler, ShippingHandler, BillingModule, ShippingModule };
  };

  /** The app with an in-memory client behind each EventMeshModule instance, by its url. */
  const compile = async (imports: Parameters<typeof Test.createTestingModule>[0]['imports']) => {
    const meshes = new Map<string, InMemoryEventMeshClient>();
    const moduleRef = await Test.createTestingModule({ imports })
      .overrideProvider(MESH_CLIENT_PORT)
      .useFactory({
        factory: (options: EventMeshModuleOptions) => {
          const mesh = new InMemoryEventMeshClient({ topic: 'orders' });
          meshes.set(options.url, mesh);
          return mesh;
        },
        inject: [EVENT_MESH_OPTIONS],
      })
      .compile();
    moduleRef.useLogger(false);
    return { moduleRef, meshes };
  };

  it('runs each handler once, on the instance its module imports', async () => {
    const { BillingHandler, ShippingHandler, BillingModule, ShippingModule } = twoFeatures();
    const { moduleRef, meshes } = await compile([BillingModule, ShippingModule]);
    const nest = await moduleRef.init();
    const billing = meshes.get('http://billing.invalid')!;
    const shipping = meshes.get('http://shipping.invalid')!;
    const { id } = await billing.publish({ type: 'order.created', source: '/test' });
    await billing.settled();
    expect(billing.answers.map((a) => [a.subscription, a.action])).toEqual([['BillingHandler.on', 'ack']]);
    expect(nest.get(BillingHandler).seen).toEqual([id]);
    expect(nest.get(ShippingHandler).seen).toEqual([]);
    await shipping.publish({ type: 'order.created', source: '/test' });
    await shipping.settled();
    expect(shipping.answers.map((a) => [a.subscription, a.action])).toEqual([['ShippingHandler.on', 'ack']]);
    await nest.close();
  });

  it('fails the bootstrap on a handler whose module imports none of several instances', async () => {
    const { BillingModule, ShippingModule } = twoFeatures();
    @Injectable()
    class StrayHandler {
      @OnMeshEvent({ topic: 'orders' })
      on() {}
    }
    @Module({ providers: [StrayHandler] })
    class StrayModule {}
    const { moduleRef } = await compile([BillingModule, ShippingModule, StrayModule]);
    await expect(moduleRef.init()).rejects.toThrow(
      /@OnMeshEvent StrayHandler\.on \(StrayModule\): .*import EventMeshModule\.forRoot .* in StrayModule/,
    );
  });
});

describe('EventMeshModule at shutdown', () => {
  it("drains before any other module's onModuleDestroy: a handler in flight finishes with the pool it uses open, and is acked", async () => {
    @Injectable()
    class Pool implements OnModuleDestroy {
      open = true;
      onModuleDestroy() {
        this.open = false;
      }
    }
    @Module({ providers: [Pool], exports: [Pool] })
    class PoolModule {}

    @Injectable()
    class Writer {
      release?: () => void;
      held = new Promise<void>((resolve) => (this.release = resolve));
      constructor(readonly pool: Pool) {}

      @OnMeshEvent({ topic: 'orders' })
      async write() {
        await this.held;
        if (!this.pool.open) throw new Error('pool closed');
      }
    }

    const moduleRef = await boot({
      imports: [EventMeshTestingModule.forRoot({ topic: 'orders' }), PoolModule],
      providers: [Writer],
    });
    const nest = await moduleRef.init();
    const mesh = nest.get(InMemoryEventMeshClient);
    const writer = nest.get(Writer);
    const pool = nest.get(Pool);
    await mesh.publish({ type: 'order.created', source: '/test' });
    const closing = nest.close();
    const draining = () =>
      nest
        .get(MeshHandlerExplorer)
        .consumerStates()
        .some((c) => c.state === 'draining');
    // Let the handler go once the drain began or the pool was closed, whichever comes first.
    while (!draining() && pool.open) await new Promise((r) => setImmediate(r));
    writer.release!();
    await closing;
    expect(mesh.answers.map((a) => [a.action, a.attempt, (a.error as Error | undefined)?.message])).toEqual([
      ['ack', 1, undefined],
    ]);
    expect(pool.open).toBe(false);
  });
});
