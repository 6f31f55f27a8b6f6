import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { EventMeshClient } from '@eventmesh/client';
import { randomUUID } from 'node:crypto';
import { Order, OrdersHandler } from './orders.handler';
import { ORDERS_TOPIC, PRICES_TOPIC } from './topics';

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly mesh: EventMeshClient,
    private readonly handler: OrdersHandler,
  ) {}

  /** Publishes `order.created`; answers with the order's id once the runtime wrote the event. */
  @Post()
  async create(@Body() order: Order) {
    const id = randomUUID();
    await this.mesh.publish(
      { type: 'order.created', source: '/examples/orders', data: { id, ...order } },
      { topic: ORDERS_TOPIC },
    );
    return { id };
  }

  @Get('handled')
  handled() {
    return this.handler.handled;
  }

  /** Asks the price responder (a request-reply through the runtime) and answers with its reply's data. */
  @Get('price/:sku')
  async price(@Param('sku') sku: string) {
    const reply = await this.mesh.request(
      { type: 'price.requested', source: '/examples/orders', data: { sku } },
      { topic: PRICES_TOPIC, timeoutMs: 10000 },
    );
    return reply.data;
  }
}
