export * from './event-frame';
export * from './cloudevent.adaptor';
export * from './kafka-record.codec';
export * from './http-binary.codec';
export * from './correlation';
export * from './session-frame';
