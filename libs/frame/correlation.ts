/**
 * The CloudEvents extension attribute that ties a reply to its request: POST /events/request sets it on the
 * request's event, and a reply names it. An event carrying it is a request, delivered at most once (delivery's
 * failure policy reads it; request-reply writes it): a property of the event, so it lives with the frame.
 */
export const CORRELATION_ATTRIBUTE = 'correlationid';
