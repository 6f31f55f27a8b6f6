export { ErrorCode, EventMeshError, HTTP_STATUS_BY_CODE } from './eventmesh-error';
export { pgText, queryInt } from './query-params';
