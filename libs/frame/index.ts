export {
  OPTIONAL_ATTRIBUTES,
  TENANT_EXTENSION,
  attributesOf,
  frameFromAttributes,
  frameToStructured,
  partitionKeyOf,
} from './event-frame';
export type { EventFrame, ExtensionValue } from './event-frame';
export {
  CE_INTEGER_MAX,
  CE_INTEGER_MIN,
  frameFromBinary,
  frameFromStructured,
  framesFromBatch,
} from './cloudevent.adaptor';
export { frameFromKafkaRecord, frameToKafkaMessage } from './kafka-record.codec';
export { frameToHttpBinary } from './http-binary.codec';
export { CORRELATION_ATTRIBUTE } from './correlation';
export { SessionFrameError, decodeSessionFrame, encodeSessionFrame } from './session-frame';
export type { SessionAttributes, SessionFrame, SessionFrameKind } from './session-frame';
