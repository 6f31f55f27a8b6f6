import { z } from 'zod';
import { CE_INTEGER_MAX, CE_INTEGER_MIN } from '@libs/frame';
import { ACL_EFFECTS, ACTIONS, GATE_ACTIONS } from '@libs/security';

/**
 * The bodies the gateway answers with, as the API document (`/openapi.json`) describes them: the wire shape of the
 * views the services return (SubscriptionView, DeadLetterView, ...). Request bodies are not here: the document takes
 * them from the schemas the routes validate with (libs/subscriptions, libs/security, ...). The API document's test
 * (test/integration/http-contract.spec.ts) checks sampled answers against these.
 */

const isoTime = z.string().describe('ISO 8601');

/** Where one published event was written. */
export const publishResultSchema = z
  .object({ id: z.string(), topic: z.string(), partition: z.number().int(), offset: z.number().int() })
  .strict();
export const publishAnswerSchema = z.union([
  publishResultSchema,
  z.object({ results: z.array(publishResultSchema) }).strict(),
]);

export const subscriptionViewSchema = z
  .object({
    id: z.string(),
    name: z.string().optional().describe("the tenant's key for it (unique within the tenant), when it has one"),
    topic: z.string(),
    protocol: z.enum(['HTTP', 'STREAM']),
    sink: z.string().optional(),
    filters: z.array(z.unknown()),
    config: z.looseObject({}),
    instance: z.string(),
    status: z.string(),
    createdAt: isoTime,
    secret: z.string().optional().describe('the Standard Webhooks signing secret: in the answer to the create only'),
  })
  .strict();

export const skippedRangeViewSchema = z
  .object({
    topic: z.string(),
    partition: z.number().int(),
    fromOffset: z.number().int(),
    toOffset: z.number().int(),
    events: z.number().int(),
    reason: z.string(),
    firstRecordedAt: isoTime,
    lastRecordedAt: isoTime,
  })
  .strict();

/** A CloudEvent in the structured JSON mode, as the gateway answers with one. */
export const structuredEventSchema = z.looseObject({
  specversion: z.string(),
  id: z.string(),
  source: z.string(),
  type: z.string(),
});

const attribute = z.string().min(1);
/** What `atob` decodes (the `cloudevents` library's check of `data_base64`). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * A CloudEvent in the structured JSON mode as a publish takes one: the rules of the adaptor
 * (libs/frame/cloudevent.adaptor.ts, the `cloudevents` library's), as JSON Schema states them. Extensions are
 * lowercase alphanumeric names with a string, integer or boolean value; `data` or `data_base64`, not both; no
 * `schemaurl` (0.3); and `data` is a string unless the data content type is JSON.
 */
const eventAttributes = {
  specversion: z.literal('1.0'),
  id: attribute,
  source: attribute.meta({ format: 'uri-reference' }),
  type: attribute,
  datacontenttype: attribute.optional(),
  dataschema: attribute.meta({ format: 'uri' }).optional(),
  subject: attribute.optional(),
  time: z.iso.datetime({ offset: true }).optional(),
  data: z.unknown().optional(),
  data_base64: z.string().regex(BASE64).optional(),
};
const eventRules = {
  propertyNames: { pattern: '^(?:[a-z0-9]+|data_base64)$' },
  not: { anyOf: [{ required: ['data', 'data_base64'] }, { required: ['schemaurl'] }] },
  if: { required: ['datacontenttype'], properties: { datacontenttype: { not: { pattern: '[/+]json(;|$)' } } } },
  then: { properties: { data: { type: 'string' } } },
};
/** An extension's value: a string, a boolean, or a CloudEvents Integer (-2^31 to 2^31 - 1; the adaptor's rule). */
const extension = z.union([z.string(), z.number().int().min(CE_INTEGER_MIN).max(CE_INTEGER_MAX), z.boolean()]);
export const publishedEventSchema = z.object(eventAttributes).catchall(extension).meta(eventRules);
/** A reply (`POST /events/reply`): a published event that names its request in the `correlationid` extension. */
export const replyEventSchema = z
  .object({ ...eventAttributes, correlationid: attribute })
  .catchall(extension)
  .meta(eventRules);

export const streamDeliverySchema = z.object({ deliveryId: z.string(), event: structuredEventSchema }).strict();
/**
 * One Server-Sent Event of `GET /subscriptions/{id}/events`, as a client's parser sees it (OpenAPI 3.1 has the
 * schema of `text/event-stream` describe each event): `id` the delivery id, `event` "cloudevent", `data` the
 * delivery as JSON text.
 */
export const sseDeliverySchema = z
  .object({
    id: z.string().min(1).describe('the delivery id (Last-Event-ID)'),
    event: z.literal('cloudevent'),
    data: z
      .string()
      .meta({ contentMediaType: 'application/json' })
      .describe(
        '`{ deliveryId, event }` as JSON: the delivery id and the event in the structured JSON mode (as `/poll` answers each)',
      ),
  })
  .strict();
export const pollAnswerSchema = z.object({ consumer: z.string(), deliveries: z.array(streamDeliverySchema) }).strict();
export const ackResultSchema = z.object({ deliveryId: z.string(), accepted: z.boolean() }).strict();
export const ackAnswerSchema = z.union([ackResultSchema, z.array(ackResultSchema)]);

/** One answer to a stream delivery (`POST /subscriptions/{id}/acks`, also in an array). */
export const ackBodySchema = z
  .object({
    deliveryId: z.string().min(1),
    action: z.enum(['ack', 'nack', 'reject', 'extend']),
    delayMs: z.number().int().min(0).max(3600000).optional().describe('nack: when to retry (1000 when absent)'),
    reason: z.string().optional().describe('reject: why (first 500 characters kept)'),
    deadlineMs: z
      .number()
      .int()
      .min(1)
      .max(3600000)
      .optional()
      .describe("extend (required there): the delivery's ack deadline, this long from now"),
  })
  // `extend` needs its deadline (the route's own check, outcomeOf in streams.controller.ts, refuses one without).
  .meta({ if: { properties: { action: { const: 'extend' } } }, then: { required: ['deadlineMs'] } });

export const replyAnswerSchema = z.object({ correlationId: z.string(), delivered: z.literal(true) }).strict();

const dependencySchema = z.looseObject({ status: z.enum(['up', 'down']) });
export const healthReportSchema = z.looseObject({
  status: z.enum(['up', 'down']),
  instance: z.string(),
  pid: z.number().int(),
  topology: z.string(),
  dependencies: z.looseObject({ postgres: dependencySchema, kafka: dependencySchema, temporal: dependencySchema }),
});

export const livenessReportSchema = z.looseObject({
  status: z.literal('up'),
  instance: z.string(),
  pid: z.number().int(),
  uptimeSeconds: z.number().int(),
});

export const readinessReportSchema = z.looseObject({
  status: z.enum(['up', 'down']),
  instance: z.string(),
  pid: z.number().int(),
  dependencies: z.looseObject({ postgres: dependencySchema, kafka: dependencySchema, temporal: dependencySchema }),
  delivery: z.looseObject({ status: z.enum(['up', 'stalled']), loops: z.number().int() }),
  checkedAt: z.string(),
});

export const aclRuleBodySchema = z
  .object({
    // The checks of libs/security/acl-rules.ts (parseSubject) and topic-pattern.ts, as patterns.
    subject: z
      .string()
      .regex(/^(?:tenant:\*|principal:\*|principal:[^\s*?]{1,256})$/u)
      .describe('`principal:<name>`, or `principal:*` / `tenant:*` for every principal of the tenant'),
    action: z.enum([...(GATE_ACTIONS as [string, ...string[]]), '*']),
    topic: z
      .string()
      .regex(/^[A-Za-z0-9._\-*?]{1,249}$/)
      .describe('a topic, or a pattern with the wildcards `*` and `?`'),
    effect: z.enum(ACL_EFFECTS),
  })
  .strict();
export const aclRuleViewSchema = z
  .object({
    id: z.string(),
    tenant: z.string(),
    subject: z.string(),
    action: z.string(),
    topic: z.string(),
    effect: z.enum(ACL_EFFECTS),
    createdAt: isoTime,
  })
  .strict();

export const apiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    tenant: z.string(),
    principal: z.string(),
    scopes: z.array(z.enum(ACTIONS)),
    createdAt: isoTime,
    revokedAt: isoTime.nullable(),
    lastUsedAt: isoTime.nullable(),
  })
  .strict();
export const createdApiKeySchema = apiKeySchema.extend({
  key: z.string().describe('`emk_<id>_<secret>`: shown this once'),
});

export const publisherSecretViewSchema = z
  .object({ id: z.string(), principal: z.string(), createdAt: isoTime })
  .strict();

export const tenantQuotaViewSchema = z
  .object({ tenant: z.string(), quota: z.looseObject({}), overrides: z.looseObject({}) })
  .strict();

export const agentViewSchema = z
  .object({
    name: z.string(),
    card: z.looseObject({}),
    style: z.enum(['url', 'subscriber']),
    heartbeatAt: isoTime.optional(),
    registration: z.number().int().min(1).max(2_147_483_647),
    createdAt: isoTime,
    updatedAt: isoTime,
  })
  .strict();

export const partitionMovesSchema = z.object({ moves: z.array(z.looseObject({})) }).strict();
export const partitionsViewSchema = z.looseObject({
  members: z.array(z.string()),
  drained: z.array(z.string()),
  generation: z.number().int(),
  partitions: z.array(z.looseObject({})),
});
export const orphansViewSchema = z.looseObject({
  graceMs: z.number(),
  takeover: z.string(),
  liveInstances: z.array(z.string()),
  orphans: z.array(z.looseObject({})),
});
export const moveViewSchema = z
  .object({
    subscription: z.string(),
    from: z.string(),
    to: z.string(),
    moved: z.boolean(),
    fencedEpoch: z.number().int().nullable(),
  })
  .strict();

/** A JSON-RPC 2.0 answer (A2A's JSON-RPC binding). */
export const jsonRpcAnswerSchema = z.looseObject({
  jsonrpc: z.literal('2.0'),
  id: z.union([z.string(), z.number(), z.null()]),
});
