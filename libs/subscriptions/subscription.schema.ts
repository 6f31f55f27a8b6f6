import { z } from 'zod';

/**
 * Request bodies of the subscriptions resource, in the shape of the CloudEvents Subscriptions API
 * (`sink`, `protocol`, `filters`, `config`), plus the Kafka `topic` the subscription reads.
 */
const httpUrl = z
  .string()
  .url()
  .refine((s) => /^https?:\/\//i.test(s), 'sink must be an http(s) URL');

/** Where a new subscription starts: the end of the topic, its beginning, or the first event at a time. */
export const startFromSchema = z.union([
  z.literal('latest'),
  z.literal('earliest'),
  z.string().datetime({ offset: true }),
]);

export const createSubscriptionSchema = z
  .object({
    sink: httpUrl,
    protocol: z.literal('HTTP').default('HTTP'),
    topic: z.string().min(1).optional(),
    filters: z
      .array(z.unknown())
      .max(0, 'filters are not supported yet: a subscription receives every event of its topic')
      .default([]),
    config: z
      .object({
        startFrom: startFromSchema.default('latest'),
        /** Skip the webhook validation handshake: the operator vouches for the sink. */
        trusted: z.boolean().default(false),
      })
      .strict()
      .default({ startFrom: 'latest', trusted: false }),
  })
  .strict();

export type CreateSubscriptionRequest = z.infer<typeof createSubscriptionSchema>;

export interface SubscriptionView {
  id: string;
  topic: string;
  protocol: string;
  sink: string;
  filters: unknown[];
  config: Record<string, unknown>;
  instance: string;
  status: string;
  createdAt: string;
  /** The Standard Webhooks signing secret; shown once, in the answer to the create. */
  secret?: string;
}
