import { ErrorCode, EventMeshError } from '@libs/errors';
import { type RequestFrameAdaptor, mediaTypeOf } from './frame-adaptor';

/** Where a request is read: whether the route takes a batch (`POST /events/publish` does, request-reply does not). */
export interface AdaptorLookup {
  batch: boolean;
}

/**
 * The adaptors a gateway reads events with, in registration order (the order a 415 names them in). A request
 * goes to the adaptor whose selecting header it carries, else to the one of its media type; none is a 415
 * `UNSUPPORTED_MEDIA_TYPE` listing what is accepted (`details.accepted`).
 */
export class AdaptorRegistry {
  private readonly adaptors: RequestFrameAdaptor[] = [];

  constructor(adaptors: readonly RequestFrameAdaptor[] = []) {
    adaptors.forEach((adaptor) => this.register(adaptor));
  }

  /** Adds an adaptor; a media type or selecting header another adaptor reads already is refused. */
  register(adaptor: RequestFrameAdaptor): this {
    for (const other of this.adaptors) {
      const shared = adaptor.mediaTypes.find((type) => other.mediaTypes.includes(type));
      const header = adaptor.selectedBy?.header;
      if (shared !== undefined || (header !== undefined && header === other.selectedBy?.header))
        throw new Error(`frame adaptor ${adaptor.name}: ${other.name} reads ${shared ?? header} already`);
    }
    this.adaptors.push(adaptor);
    return this;
  }

  /** The adaptor of a request with these headers, or undefined. */
  find(headers: Record<string, string | string[] | undefined>, lookup: AdaptorLookup): RequestFrameAdaptor | undefined {
    const usable = (adaptor: RequestFrameAdaptor) => lookup.batch || !adaptor.batch;
    const byHeader = this.adaptors.find(
      (adaptor) => adaptor.selectedBy !== undefined && headers[adaptor.selectedBy.header] !== undefined,
    );
    if (byHeader) return usable(byHeader) ? byHeader : undefined;
    const mediaType = mediaTypeOf(headers['content-type']);
    return this.adaptors.find((adaptor) => usable(adaptor) && adaptor.mediaTypes.includes(mediaType));
  }

  /** {@link find}, or a 415 naming what is accepted here. */
  adaptorFor(headers: Record<string, string | string[] | undefined>, lookup: AdaptorLookup): RequestFrameAdaptor {
    const adaptor = this.find(headers, lookup);
    if (adaptor) return adaptor;
    const accepted = this.adaptors
      .filter((a) => lookup.batch || !a.batch)
      .flatMap((a) => (a.accepted !== undefined ? [a.accepted] : a.mediaTypes));
    const mediaType = mediaTypeOf(headers['content-type']);
    const named = this.adaptors.flatMap((a) => (a.selectedBy ? [a.selectedBy.named] : []));
    const without = named.length > 0 ? ` without ${named.join(' or ')}` : '';
    throw new EventMeshError(
      ErrorCode.UnsupportedMediaType,
      `content type "${mediaType || '(none)'}" is not accepted here${without}; send ${accepted.join(', ')}`,
      { accepted },
    );
  }

  /** The media types read as JSON (the transport parses those bodies first). */
  jsonMediaTypes(): string[] {
    return this.adaptors.filter((adaptor) => adaptor.json).flatMap((adaptor) => adaptor.mediaTypes);
  }
}
