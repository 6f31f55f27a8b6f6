export * from './request-reply.service';
