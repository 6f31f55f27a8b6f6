import { Controller, Get, Header } from '@nestjs/common';
import { ApiRoute } from '../http/api-route';
import { GateRoute, Gates } from '../http/gate-route';
import { OpenApiDocument, openApiDocument } from './openapi';
import { openApiPage } from './openapi-page';
import { RouteTable } from '../http/route-table';

/** The version of the HTTP API the document describes. */
export const API_VERSION = '0.1.0';

/**
 * The API document of the running gateway, `/openapi.json` (OpenAPI 3.1), and `/docs`, the same as a page. Made
 * once, on the first request, from the route table (every route is registered by then). Public: it shows routes and
 * schemas, no data.
 */
@Controller()
@GateRoute({ public: true })
export class ApiDocsController {
  private document?: OpenApiDocument;
  private page?: string;

  constructor(
    private readonly routes: RouteTable,
    private readonly gates: Gates,
  ) {}

  @Get('openapi.json')
  @ApiRoute({
    summary: 'This document (OpenAPI 3.1)',
    tags: ['docs'],
    responses: { 200: { description: 'the OpenAPI document' } },
  })
  openApi(): OpenApiDocument {
    return (this.document ??= openApiDocument(this.routes.routes(), API_VERSION, {
      ingress: this.gates.ingress.stats(),
      admin: this.gates.admin.stats(),
    }));
  }

  @Get('docs')
  @Header('content-type', 'text/html; charset=utf-8')
  @ApiRoute({
    summary: 'This document as an HTML page',
    tags: ['docs'],
    responses: { 200: { description: 'the page', contentType: 'text/html' } },
  })
  docs(): string {
    return (this.page ??= openApiPage(this.openApi()));
  }
}
