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
    /** Checked in full by compileFilters (libs/filter) when the subscription is created. */
    filters: z.array(z.unknown()).default([]),
    config: z
      .object({
        startFrom: startFromSchema.default('latest'),
        /** Skip the webhook validation handshake: the operator vouches for the sink. */
        trusted: z.boolean().default(false),
        /** This subscription's retry policy; each field defaults to the runtime's. */
        retry: z
          .object({
            maxAttempts: z.number().int().min(1).max(1000).optional(),
            initialDelayMs: z.number().int().min(10).max(3600000).optional(),
            maxDelayMs: z.number().int().min(10).max(86400000).optional(),
          })
          .strict()
          .refine((r) => r.maxDelayMs === undefined || r.initialDelayMs === undefined || r.maxDelayMs >= r.initialDelayMs, {
            message: 'maxDelayMs must be at least initialDelayMs',
          })
          .optional(),
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

export interface DeadLetterView {
  id: string;
  topic: string;
  partition: number;
  offset: number;
  eventId: string;
  attributes: object;
  dataBase64: string | null;
  attempts: number;
  lastError: string;
  firstFailedAt: string;
  lastFailedAt: string;
}
