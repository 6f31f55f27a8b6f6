/**
 * True when `e` is a kafkajs error that says Kafka could not serve the request now, so the caller may repeat it: one
 * kafkajs marks retriable (a connection refused or closed, a request timed out, a partition without a leader yet),
 * or the retries of one exhausted (`KafkaJSNumberOfRetriesExceeded`, its cause followed). A request Kafka refuses
 * for good (an authorization failure, an invalid topic) is not.
 */
export function isKafkaUnavailable(e: unknown): boolean {
  let error = e as { name?: unknown; retriable?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; depth < 4 && typeof error === 'object' && error !== null; depth++) {
    const name = typeof error.name === 'string' ? error.name : '';
    if (!name.startsWith('KafkaJS')) return false;
    if (error.retriable === true) return true;
    if (name !== 'KafkaJSNumberOfRetriesExceeded') return false;
    error = error.cause as typeof error;
  }
  return false;
}
