import { z } from 'zod';
import {
  BATCH_DEFAULTS,
  BATCH_MAX_BYTES,
  BATCH_MAX_EVENTS,
  BATCH_MAX_LINGER_MS,
  BATCH_MIN_BYTES,
  ORDERINGS,
} from '@libs/delivery';

/**
 * Request bodies of the subscriptions resource, in the shape of the CloudEvents Subscriptions API
 * (`sink`, `protocol`, `filters`, `config`), plus the Kafka `topic` the subscription reads.
 */
const httpUrl = z
  .string()
  .url()
  .refine((s) => /^https?:\/\//i.test(s), 'sink must be an http(s) URL')
  .meta({ pattern: '^[Hh][Tt][Tt][Pp][Ss]?://' });

/** Where a new subscription starts: the end of the topic, its beginning, or the first event at a time. */
export const startFromSchema = z.union([
  z.literal('latest'),
  z.literal('earliest'),
  z.string().datetime({ offset: true }),
]);

const absent = (...names: string[]) => ({ not: { anyOf: names.map((n) => ({ required: [n] })) } });
/** STREAM: no sink, no ordering or concurrency; HTTP: a sink, no policy or ackTimeoutMs. */
const STREAM_RULES = { ...absent('sink'), properties: { config: absent('ordering', 'concurrency') } };
const HTTP_RULES = { required: ['sink'], properties: { config: absent('policy', 'ackTimeoutMs') } };
const isProtocol = (protocol: string) => ({ properties: { protocol: { const: protocol } }, required: ['protocol'] });
/** A create's: HTTP when the protocol is absent. */
const PROTOCOL_RULES = { if: isProtocol('STREAM'), then: STREAM_RULES, else: HTTP_RULES };
/** `concurrency` only with ordering `key` or `none`, and not with `batch` (one batch out per partition). */
const CONCURRENCY_RULE = {
  properties: {
    config: {
      if: { required: ['concurrency'] },
      then: { required: ['ordering'], properties: { ordering: { enum: ['key', 'none'] } }, ...absent('batch') },
    },
  },
};

/** `batch` not with policy BROADCAST or MULTICAST (a batch goes to one client). */
const BATCH_POLICY_RULE = {
  properties: {
    config: {
      if: { required: ['policy'], properties: { policy: { enum: ['BROADCAST', 'MULTICAST'] } } },
      then: absent('batch'),
    },
  },
};

/** A subscription's name: unique within its tenant, a path segment of `/subscriptions/by-name/{name}`. */
export const subscriptionNameSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/,
    'letters, digits and . _ : - (up to 200), starting with a letter or digit',
  );

export const createSubscriptionSchema = z
  .object({
    /** The tenant's key for it (unique within the tenant); absent: unnamed. Fixed at create. */
    name: subscriptionNameSchema.optional(),
    /** `HTTP`: webhook push to `sink`. `STREAM`: clients of this instance pull over SSE or long-poll. */
    protocol: z.enum(['HTTP', 'STREAM']).default('HTTP'),
    sink: httpUrl.optional(),
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
          .refine(
            (r) => r.maxDelayMs === undefined || r.initialDelayMs === undefined || r.maxDelayMs >= r.initialDelayMs,
            {
              message: 'maxDelayMs must be at least initialDelayMs',
            },
          )
          .optional(),
        /**
         * HTTP: how the subscription's events may overtake each other within a partition (libs/delivery/ordering.ts):
         * `partition` (the default) one at a time in order, `key` in order per partition key, `none` no order.
         */
        ordering: z.enum(ORDERINGS).optional(),
        /** HTTP with ordering `key` or `none`: deliveries out at once per partition (EVENTMESH_DELIVERY_CONCURRENCY when absent). */
        concurrency: z.number().int().min(1).max(256).optional(),
        /**
         * Deliver in batches (libs/delivery/webhook-batch.ts), each field defaulting as shown; absent: event by event.
         * HTTP: CloudEvents batch content mode, one POST a batch. STREAM (LOAD_BALANCE): one delivery a batch to a
         * client that takes batches (WebSocket), one answer for all its events.
         */
        batch: z
          .object({
            maxEvents: z.number().int().min(1).max(BATCH_MAX_EVENTS).default(BATCH_DEFAULTS.maxEvents),
            maxBytes: z.number().int().min(BATCH_MIN_BYTES).max(BATCH_MAX_BYTES).default(BATCH_DEFAULTS.maxBytes),
            lingerMs: z.number().int().min(0).max(BATCH_MAX_LINGER_MS).default(BATCH_DEFAULTS.lingerMs),
          })
          .strict()
          .optional(),
        /** STREAM: how events spread over the connected clients. */
        policy: z.enum(['LOAD_BALANCE', 'BROADCAST', 'MULTICAST']).optional(),
        /** STREAM: how long a client may hold a delivery unanswered before it counts as a failed attempt. */
        ackTimeoutMs: z.number().int().min(100).max(3600000).optional(),
      })
      .strict()
      .default({ startFrom: 'latest', trusted: false }),
  })
  .strict()
  .superRefine((r, ctx) => {
    if (r.protocol === 'HTTP' && r.sink === undefined)
      ctx.addIssue({ code: 'custom', path: ['sink'], message: 'an HTTP subscription needs a sink' });
    if (r.protocol === 'STREAM' && r.sink !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['sink'],
        message: 'a STREAM subscription has no sink: its clients connect to it',
      });
    if (r.protocol === 'HTTP' && (r.config.policy !== undefined || r.config.ackTimeoutMs !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['config'],
        message: 'policy and ackTimeoutMs apply to STREAM subscriptions',
      });
    }
    if (r.config.batch !== undefined && (r.config.policy === 'BROADCAST' || r.config.policy === 'MULTICAST')) {
      ctx.addIssue({
        code: 'custom',
        path: ['config', 'batch'],
        message: `batch applies to policy LOAD_BALANCE (a batch goes to one client); ${r.config.policy} delivers event by event`,
      });
    }
    if (r.protocol === 'STREAM' && (r.config.ordering !== undefined || r.config.concurrency !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['config', 'ordering'],
        message:
          "ordering and concurrency apply to HTTP subscriptions (a STREAM subscription's clients answer in any order)",
      });
    }
    if (r.config.concurrency !== undefined && (r.config.ordering ?? 'partition') === 'partition') {
      ctx.addIssue({
        code: 'custom',
        path: ['config', 'concurrency'],
        message: 'concurrency applies to ordering key or none; ordering partition delivers one event at a time',
      });
    }
    // A batched lane has one batch out at a time, whatever its ordering (libs/delivery/batch-lanes.ts): refused
    // rather than ignored.
    if (r.config.concurrency !== undefined && r.config.batch !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['config', 'concurrency'],
        message:
          'concurrency does not apply with batch: a batched subscription has one batch out per partition; leave concurrency out, or batch',
      });
    }
  })
  // The refinement above, as JSON Schema states it (the API document's): so a client reads it there.
  .meta({ allOf: [PROTOCOL_RULES, CONCURRENCY_RULE, BATCH_POLICY_RULE] });

/**
 * A replace's body, as the API document states it: the create's, but the protocol and topic default to the
 * subscription's own, so a sink is required only of a body that names protocol HTTP.
 */
export const replaceSubscriptionSchema = createSubscriptionSchema.meta({
  allOf: [
    { if: isProtocol('STREAM'), then: STREAM_RULES },
    { if: isProtocol('HTTP'), then: HTTP_RULES },
    CONCURRENCY_RULE,
    BATCH_POLICY_RULE,
  ],
});

export type CreateSubscriptionRequest = z.infer<typeof createSubscriptionSchema>;

export interface SubscriptionView {
  id: string;
  /** Absent when it has none. */
  name?: string;
  topic: string;
  protocol: string;
  sink?: string;
  filters: unknown[];
  config: Record<string, unknown>;
  instance: string;
  status: string;
  createdAt: string;
  /** The Standard Webhooks signing secret; shown once, in the answer to the create. */
  secret?: string;
}
