import { Injectable, Logger } from '@nestjs/common';
import { MeshData, MeshResponder, OnMeshEvent } from '@eventmesh/nestjs';
import { ORDERS_TOPIC, PRICES_TOPIC } from './topics';

export interface Order {
  sku: string;
  quantity: number;
}

/** Consumes the orders the controller publishes, and answers price requests. */
@Injectable()
export class OrdersHandler {
  private readonly logger = new Logger(OrdersHandler.name);
  /** Ids of the orders handled, in order (the controller shows them at `GET /orders/handled`). */
  readonly handled: string[] = [];

  @OnMeshEvent({ topic: ORDERS_TOPIC, filter: { exact: { type: 'order.created' } } })
  onOrderCreated(@MeshData() order: Order & { id: string }) {
    this.logger.log(`order ${order.id}: ${order.quantity} x ${order.sku}`);
    this.handled.push(order.id);
  }

  /** The reply to a `price.requested` event: its return value is the reply event's data. */
  @MeshResponder({ topic: PRICES_TOPIC })
  price(@MeshData('sku') sku: string) {
    return { sku, unitPrice: 100 + sku.length };
  }
}
