import { waitFor } from './wait-for';

/** The URL the orders example (examples/orders) prints once it listens, read from its output. */
export function ordersAppUrl(output: () => string): Promise<string> {
  return waitFor('the orders app to listen', () => /listening on (http:\/\/\S+)/.exec(output())?.[1], {
    timeoutMs: 120000,
  }).catch((e: Error) => {
    throw new Error(`${e.message}\n${output()}`);
  });
}

/**
 * What the orders example's README shows, against the app at `url`: its controller publishes an order, its
 * `@OnMeshEvent` handler receives it, its `@MeshResponder` answers a price request.
 */
export async function exerciseOrdersApp(url: string): Promise<void> {
  const created = await fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sku: 'abc', quantity: 2 }),
  });
  expect(created.status).toBe(201);
  const { id } = (await created.json()) as { id: string };
  await waitFor(
    'the decorated handler to receive the order',
    async () => ((await (await fetch(`${url}/orders/handled`)).json()) as string[]).includes(id),
    { timeoutMs: 60000 },
  );
  const price = await fetch(`${url}/orders/price/abcd`);
  expect(price.status).toBe(200);
  expect(await price.json()).toEqual({ sku: 'abcd', unitPrice: 104 });
}

/**
 * Deletes the stream subscriptions the orders apps' decorated methods ensure by name (`OrdersHandler.<method>`):
 * the example and the README's app name theirs alike on topics of their own, and a name is one subscription of
 * one topic in a tenant, so each spec leaves none behind (and clears what an aborted run left).
 */
export async function deleteOrdersSubscriptions(instanceUrl: string): Promise<void> {
  for (const name of ['OrdersHandler.onOrderCreated', 'OrdersHandler.price']) {
    const found = (await (await fetch(`${instanceUrl}/subscriptions?name=${encodeURIComponent(name)}`)).json()) as {
      id: string;
    }[];
    for (const { id } of found) {
      const deleted = await fetch(`${instanceUrl}/subscriptions/${id}`, { method: 'DELETE' });
      expect(deleted.status).toBe(204);
    }
  }
}
