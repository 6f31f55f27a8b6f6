export { OPTIONAL_ATTRIBUTES, TENANT_EXTENSION, partitionKeyOf } from './event-frame';
export type { EventFrame, ExtensionValue } from './event-frame';
export { CE_SPECVERSION, attributesOf, frameFromAttributes, frameToStructured } from './cloudevent-attributes';
export { jsonArrayBytesOf, structuredJsonBytesOf, structuredJsonOf } from './structured-json';
export {
  CE_INTEGER_MAX,
  CE_INTEGER_MIN,
  frameFromBinary,
  frameFromStructured,
  framesFromBatch,
} from './cloudevent.adaptor';
export type {
  DecodeLimits,
  FrameAdaptor,
  FrameTransport,
  InboundMessage,
  OutboundMessage,
  RequestFrameAdaptor,
} from './frame-adaptor';
export { AdaptorRegistry } from './adaptor-registry';
export { cloudEventsBatch, cloudEventsBinary, cloudEventsStructured } from './cloudevent-frame-adaptors';
export { frameFromKafkaRecord, frameToKafkaMessage } from './kafka-record.codec';
export { CORRELATION_ATTRIBUTE } from './correlation';
export { SessionFrameError, decodeSessionFrame, encodeSessionFrame } from './session-frame';
export type { SessionAttributes, SessionFrame, SessionFrameKind } from './session-frame';
