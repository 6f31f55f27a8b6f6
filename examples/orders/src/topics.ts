/** The topics the example uses: the instance must serve both (`EVENTMESH_KAFKA_TOPICS`). */
export const ORDERS_TOPIC = process.env.ORDERS_TOPIC ?? 'orders';
export const PRICES_TOPIC = process.env.PRICES_TOPIC ?? 'prices';
